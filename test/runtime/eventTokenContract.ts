/**
 * Refused event tokens, as one contract every journal passes (issue 31's "Must show": a forged,
 * a reused and an expired token each refused, nothing journaled). Each refusal is asked three
 * ways, `deliverEvent`, `eventFetchHandler` and `eventWebhook` (node:http on loopback), and after
 * each the run's journal is read whole and compared with what it was: the same entries, the same
 * bytes. `probe` may compare more of the store (PostgreSQL: the queue rows).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { EventDeliveryError, isEventDeliveryError } from "../../src/runtime/control/errors.ts";
import { eventFetchHandler, eventWebhook } from "../../src/runtime/control/eventHttp.ts";
import { deliverEvent } from "../../src/runtime/control/events.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const HOUR = 3_600_000;
const STEP = "order#turn:0:tool:0";

export interface TokenJournal {
  readonly journal: Journal;
  /** More of the store that a refusal must leave as it was (default: nothing more). */
  readonly probe?: () => Promise<unknown>;
  readonly close?: () => Promise<unknown>;
}

function orderLoop() {
  const tokens: string[] = [];
  const awaitPayment: Tool<{ order: string }> = {
    description: "waits for the payment webhook",
    execute: ({ order }, ctx) => {
      const wait = ctx.waitForEvent({ timeoutMs: HOUR, what: `payment of ${order}` });
      tokens.push(wait.token);
      return wait;
    },
  };
  const model = scriptedModel([
    { toolCalls: [{ id: "p", name: "awaitPayment", input: { order: "o-1" } }] },
    { content: "done", toolCalls: [] },
  ]);
  return { loop: agentLoop$({ id: "order", model, tools: { awaitPayment } }), tokens };
}

/** The token with one character of its secret (the part after the second dot) changed. */
const forge = (token: string) => {
  const [prefix, where, secret] = token.split(".") as [string, string, string];
  return `${prefix}.${where}.${secret[0] === "A" ? "B" : "A"}${secret.slice(1)}`;
};

export function eventTokenContract(name: string, open: () => Promise<TokenJournal>): void {
  describe(`refused event tokens (${name})`, () => {
    let opened: TokenJournal;
    let journal: Journal;
    let base = "";
    let server: ReturnType<typeof createServer>;
    let now = T0;
    const clock = () => now;
    let runs = 0;

    beforeAll(async () => {
      opened = await open();
      journal = opened.journal;
      const webhook = eventWebhook(journal, { now: clock });
      server = createServer((req, res) => void webhook(req, res));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
    });
    afterAll(async () => {
      await new Promise((r) => server.close(r));
      await opened.close?.();
    });

    /** A run waiting for its payment (until T0 + 1 h), and its token. */
    async function waiting() {
      const runId = `order-${++runs}`;
      const { loop, tokens } = orderLoop();
      now = T0;
      const stopped = await loop.run({ runId, journal, input: "sell", now: clock }).catch((e: unknown) => e);
      expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("waiting");
      return { runId, loop, token: tokens[0] as string };
    }

    /** What a refusal must leave alone: the run's every entry, as bytes, and the store's extra probe. */
    const state = async (runId: string) => JSON.stringify([await readJournal(journal, runId), await opened.probe?.()]);

    /** `token` delivered three ways, each refused with `code` (and its HTTP status), nothing journaled. */
    async function refusedEveryWay(runId: string, token: string, code: string, status: number) {
      const before = await state(runId);
      const e = await deliverEvent(journal, token, { paid: 1 }, { now: clock }).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(EventDeliveryError);
      expect(isEventDeliveryError(e) && [e.name, e.code]).toEqual(["EventDeliveryError", code]);
      expect((e as Error).message).toContain(`run ${runId} step ${STEP}`); // says which run and step
      expect(await state(runId)).toBe(before);

      const fetched = await eventFetchHandler(journal, { now: clock })(
        new Request(`http://localhost/events/${encodeURIComponent(token)}`, { method: "POST", body: '{"paid":2}' }),
      );
      expect([fetched.status, ((await fetched.json()) as { error: string }).error]).toEqual([status, code]);
      expect(await state(runId)).toBe(before);

      const posted = await fetch(`${base}/${encodeURIComponent(token)}`, { method: "POST", body: '{"paid":3}' });
      expect([posted.status, ((await posted.json()) as { error: string }).error]).toEqual([status, code]);
      expect(await state(runId)).toBe(before);
    }

    it("refuses a forged token (404): its secret changed, or it names another run", async () => {
      const { runId, token } = await waiting();
      await refusedEveryWay(runId, forge(token), "eventUnknownToken", 404);
      // The run and step of a token are not secret: naming them with a made-up secret is forging too.
      const other = await waiting();
      const [prefix, , secret] = token.split(".") as [string, string, string];
      const [, otherWhere] = other.token.split(".") as [string, string];
      await refusedEveryWay(other.runId, `${prefix}.${otherWhere}.${secret}`, "eventUnknownToken", 404);
    });

    it("refuses a reused token (409), before and after the run went on with the first delivery", async () => {
      const { runId, token, loop } = await waiting();
      now = T0 + HOUR - 1; // in time
      await deliverEvent(journal, token, { paid: 4200 }, { now: clock });
      await refusedEveryWay(runId, token, "eventAlreadyDelivered", 409);
      const out = await loop.run({ runId, journal, now: clock });
      expect(out.toolCallLog[0]?.toolOutput).toEqual({ paid: 4200 }); // the first delivery, not a later one
      await refusedEveryWay(runId, token, "eventAlreadyDelivered", 409);
    });

    it("refuses an expired token (410), then, once the run told the model, as ended (409)", async () => {
      const { runId, token, loop } = await waiting();
      now = T0 + HOUR; // the wait's timeout
      await refusedEveryWay(runId, token, "eventExpired", 410);
      const out = await loop.run({ runId, journal, now: clock });
      expect(out.toolCallLog[0]?.toolOutput).toMatchObject({ error: "wait-expired" });
      await refusedEveryWay(runId, token, "eventAlreadyDelivered", 409);
    });
  });
}

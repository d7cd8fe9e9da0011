/**
 * Waiting for an event (issue 31): deliverEvent journals the payload as the call's outcome in one
 * fenced, conditional append; a forged, a reused and an expired token are each refused with
 * nothing journaled; the run is resumed by the next loop.run or wakeDueRuns; the HTTP handlers.
 */

import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { isEventDeliveryError } from "../../src/runtime/control/errors.ts";
import { eventFetchHandler, eventWebhook } from "../../src/runtime/control/eventHttp.ts";
import { deliverEvent } from "../../src/runtime/control/events.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { listWaits, wakeDueRuns } from "../../src/runtime/run/waits.ts";
import { jsonJournal } from "../support/loop.ts";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const HOUR = 3_600_000;

function payingLoop(timeoutMs?: number) {
  const tokens: string[] = [];
  const awaitPayment: Tool<{ order: string }> = {
    description: "waits for the payment webhook",
    execute: ({ order }, ctx) => {
      const wait = ctx.waitForEvent({ ...(timeoutMs === undefined ? {} : { timeoutMs }), what: `payment of ${order}` });
      tokens.push(wait.token);
      return wait;
    },
  };
  const model = scriptedModel([
    { toolCalls: [{ id: "p", name: "awaitPayment", input: { order: "o-1" } }] },
    { content: "paid", toolCalls: [] },
  ]);
  return { loop: agentLoop$({ id: "order", model, tools: { awaitPayment } }), tokens, model };
}

async function refused(journal: Journal, runId: string, p: Promise<unknown>) {
  const before = (await readJournal(journal, runId)).length;
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect((await readJournal(journal, runId)).length).toBe(before); // nothing journaled
  return isEventDeliveryError(e) ? e.code : e;
}

describe("deliverEvent", () => {
  it("journals the payload as the call's outcome; the next run feeds it to the model", async () => {
    const { loop, tokens, model } = payingLoop();
    const journal = jsonJournal();
    const stopped = await loop.run({ runId: "o1", journal, input: "sell" }).catch((e) => e);
    expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("waiting");
    expect(await listWaits(journal)).toEqual([
      expect.objectContaining({ runId: "o1", kind: "event", what: "payment of o-1", toolName: "awaitPayment" }),
    ]);
    const delivered = await deliverEvent(journal, tokens[0] as string, { paid: 4200 });
    expect(delivered).toEqual({ runId: "o1", stepId: "order#turn:0:tool:0", toolName: "awaitPayment" });
    expect(await listWaits(journal)).toEqual([]);
    const out = await loop.run({ runId: "o1", journal });
    expect(out.toolCallLog[0]?.toolOutput).toEqual({ paid: 4200 });
    expect(model.calls).toBe(2);
  });

  it("refuses a forged, a reused and an expired token, journaling nothing", async () => {
    const { loop, tokens } = payingLoop(HOUR);
    const journal = jsonJournal();
    await loop.run({ runId: "o2", journal, input: "sell", now: () => T0 }).catch(() => {});
    const token = tokens[0] as string;
    const [prefix, where, secret] = token.split(".");
    const forged = `${prefix}.${where}.${(secret as string).replace(/^./, (c) => (c === "A" ? "B" : "A"))}`;
    expect(await refused(journal, "o2", deliverEvent(journal, forged, { paid: 1 }, { now: () => T0 }))).toBe(
      "eventUnknownToken",
    );
    expect(await refused(journal, "o2", deliverEvent(journal, "garbage", {}))).toBe("eventUnknownToken");
    expect(await refused(journal, "o2", deliverEvent(journal, token, { paid: 1 }, { now: () => T0 + HOUR }))).toBe(
      "eventExpired",
    );
    await deliverEvent(journal, token, { paid: 1 }, { now: () => T0 + HOUR - 1 });
    expect(await refused(journal, "o2", deliverEvent(journal, token, { paid: 2 }, { now: () => T0 }))).toBe(
      "eventAlreadyDelivered",
    );
    const out = await loop.run({ runId: "o2", journal, now: () => T0 + 2 * HOUR });
    expect(out.toolCallLog[0]?.toolOutput).toEqual({ paid: 1 }); // delivered in time: no timeout
  });

  it("of two concurrent deliveries exactly one is journaled", async () => {
    const { loop, tokens } = payingLoop();
    const journal = jsonJournal();
    await loop.run({ runId: "o3", journal, input: "sell" }).catch(() => {});
    const results = await Promise.allSettled([1, 2, 3].map((n) => deliverEvent(journal, tokens[0] as string, { n })));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const completions = (await readJournal(journal, "o3")).filter((e) => e.type === "frame.completed");
    expect(completions).toHaveLength(2); // the model's turn and the one delivery
  });
});

describe("a run whose process is gone (SQLite)", () => {
  const dir = mkdtempSync(join(tmpdir(), "loom-events-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is resumed by wakeDueRuns once its event is delivered, and not before", async () => {
    const file = join(dir, "orders.db");
    const first = payingLoop();
    let journal = openSqliteJournal(file);
    await first.loop.run({ runId: "o4", journal, input: "sell" }).catch(() => {});
    await journal.close(); // the process is gone
    journal = openSqliteJournal(file);
    const again = payingLoop(); // a new process: the same loop, no memory of the token
    expect(await wakeDueRuns(journal, { loops: [again.loop] })).toEqual([
      expect.objectContaining({ runId: "o4", outcome: "not-due", dueAt: undefined }),
    ]);
    await deliverEvent(journal, first.tokens[0] as string, { paid: true });
    expect(await wakeDueRuns(journal, { loops: [again.loop] })).toEqual([
      expect.objectContaining({ runId: "o4", outcome: "completed" }),
    ]);
    expect(again.tokens).toEqual([]); // the tool did not run again
    expect(await wakeDueRuns(journal, { loops: [again.loop] })).toEqual([]); // nothing waits now
    await journal.close();
  });
});

describe("HTTP handlers", () => {
  it("eventWebhook: 200 once, then 409; 404 for a forged token; 405 for GET", async () => {
    const { loop, tokens } = payingLoop();
    const journal = jsonJournal();
    await loop.run({ runId: "o5", journal, input: "sell" }).catch(() => {});
    const resumed: string[] = [];
    const handler = eventWebhook(journal, { onDelivered: ({ runId }) => resumed.push(runId) });
    const server = createServer((req, res) => void handler(req, res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
    try {
      const post = (token: string, body: unknown) =>
        fetch(`${base}/${encodeURIComponent(token)}`, { method: "POST", body: JSON.stringify(body) });
      const ok = await post(tokens[0] as string, { paid: 7 });
      expect([ok.status, await ok.json()]).toEqual([
        200,
        { delivered: { runId: "o5", stepId: "order#turn:0:tool:0" } },
      ]);
      expect((await post(tokens[0] as string, { paid: 8 })).status).toBe(409);
      expect((await post("lw1.e30.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", {})).status).toBe(404);
      expect((await fetch(`${base}/x`)).status).toBe(405);
      expect(resumed).toEqual(["o5"]);
    } finally {
      server.close();
    }
    expect((await loop.run({ runId: "o5", journal })).toolCallLog[0]?.toolOutput).toEqual({ paid: 7 });
  });

  it("eventFetchHandler answers the same way for fetch-style requests", async () => {
    const { loop, tokens } = payingLoop();
    const journal = jsonJournal();
    await loop.run({ runId: "o6", journal, input: "sell" }).catch(() => {});
    const handle = eventFetchHandler(journal);
    const url = `http://localhost/events/${tokens[0]}`;
    const bad = await handle(new Request(url, { method: "POST", body: "{not json" }));
    expect(bad.status).toBe(400);
    const ok = await handle(new Request(url, { method: "POST", body: '{"paid":9}' }));
    expect(ok.status).toBe(200);
    expect((await handle(new Request(url, { method: "POST", body: "{}" }))).status).toBe(409);
  });
});

/**
 * Durable waits (issue 31): a tool's `ctx.sleep` / `waitForEvent` journals `<stepId>:wait`, the
 * run interrupts `waiting`, a resume before due re-interrupts without running anything, a due
 * resume completes the call with the wake's result; an event wait past its timeout fails.
 */
import { describe, expect, it } from "vitest";
import { waitId } from "../../src/events/ids.ts";
import { readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const DAY = 86_400_000;
const T0 = Date.parse("2026-01-01T00:00:00.000Z");

function sleeper() {
  let executions = 0;
  const remind: Tool<{ days: number }> = {
    description: "reminds later",
    execute: ({ days }, ctx) => {
      executions++;
      return ctx.sleep(days * DAY, { result: { reminded: true }, what: "remind about the order" });
    },
  };
  const model = scriptedModel([
    { toolCalls: [{ id: "r1", name: "remind", input: { days: 3 } }] },
    { content: "reminded", toolCalls: [] },
  ]);
  const loop = agentLoop$({ id: "rem", model, tools: { remind } });
  return { loop, model, executions: () => executions };
}

describe("durable sleep", () => {
  it("interrupts waiting, re-interrupts before due without running anything, wakes once when due", async () => {
    const { loop, model, executions } = sleeper();
    const journal = jsonJournal();
    let now = T0;
    const clock = () => now;
    const first = await loop.run({ runId: "s1", journal, input: "remind me", now: clock }).catch((e) => e);
    expect(isAgentInterruptedError(first) && first.run.reason).toBe("waiting");
    const stepId = "rem#turn:0:tool:0";
    expect(first.run.waits).toEqual([
      expect.objectContaining({
        stepId,
        kind: "sleep",
        until: "2026-01-04T00:00:00.000Z",
        what: "remind about the order",
      }),
    ]);
    const entries = await readJournal(journal, "s1");
    const wait = entries.find((e) => e.type === "decision.recorded" && e.data.decisionId === waitId(stepId));
    expect(wait?.data).toMatchObject({ source: "wait", choice: { kind: "sleep", until: "2026-01-04T00:00:00.000Z" } });
    const last = entries.at(-1);
    expect(last?.type === "run.interrupted" && last.data.detail).toEqual({
      stepIds: [stepId],
      expiresAt: { [stepId]: "2026-01-04T00:00:00.000Z" },
    });

    now = T0 + 3 * DAY - 1; // a millisecond early
    const early = await loop.run({ runId: "s1", journal, now: clock }).catch((e) => e);
    expect(isAgentInterruptedError(early) && early.run.reason).toBe("waiting");
    expect(early.run.waits[0].until).toBe("2026-01-04T00:00:00.000Z"); // never shortened
    expect([executions(), model.calls]).toEqual([1, 1]);

    now = T0 + 3 * DAY;
    const out = await loop.run({ runId: "s1", journal, now: clock });
    expect(out.content).toBe("reminded");
    expect(out.toolCallLog).toEqual([
      { iteration: 0, toolName: "remind", toolInput: { days: 3 }, toolOutput: { reminded: true } },
    ]);
    expect([executions(), model.calls]).toEqual([1, 2]); // the tool ran once; the wake is its outcome
    const again = await loop.run({ runId: "s1", journal, now: () => now + 10 * DAY });
    expect(again.content).toBe("reminded");
  });

  it("a sleep's default result is the wake time", async () => {
    const nap: Tool = { description: "naps", execute: (_i, ctx) => ctx.waitUntil("2026-01-02T00:00:00.000Z") };
    const model = scriptedModel([
      { toolCalls: [{ id: "n", name: "nap", input: {} }] },
      { content: "done", toolCalls: [] },
    ]);
    const loop = agentLoop$({ id: "nap", model, tools: { nap } });
    const journal = jsonJournal();
    await loop.run({ runId: "n1", journal, input: "nap", now: () => T0 }).catch(() => {});
    const out = await loop.run({ runId: "n1", journal, now: () => T0 + DAY });
    expect(out.toolCallLog[0]?.toolOutput).toEqual({ woke: "2026-01-02T00:00:00.000Z" });
  });
});

describe("event waits", () => {
  it("an event wait past its timeout goes to the model as the call's failure", async () => {
    let token = "";
    const pay: Tool = {
      description: "waits for payment",
      execute: (_i, ctx) => {
        const wait = ctx.waitForEvent({ timeoutMs: DAY, what: "payment" });
        token = wait.token;
        return wait;
      },
    };
    const model = scriptedModel([
      { toolCalls: [{ id: "p", name: "pay", input: {} }] },
      { content: "no payment", toolCalls: [] },
    ]);
    const loop = agentLoop$({ id: "pay", model, tools: { pay } });
    const journal = jsonJournal();
    const stopped = await loop.run({ runId: "e1", journal, input: "pay", now: () => T0 }).catch((e) => e);
    expect(stopped.run.waits).toEqual([
      expect.objectContaining({ kind: "event", expiresAt: "2026-01-02T00:00:00.000Z", what: "payment" }),
    ]);
    const text = JSON.stringify(await readJournal(journal, "e1"));
    expect(token).toMatch(/^lw1\./);
    expect(text).not.toContain(token.split(".")[2]); // only the digest is journaled
    const out = await loop.run({ runId: "e1", journal, now: () => T0 + DAY });
    expect(out.toolCallLog[0]?.toolOutput).toMatchObject({ error: "wait-expired" });
    expect(model.calls).toBe(2);
  });
});

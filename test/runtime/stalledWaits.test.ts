/**
 * Waits are found from their decisions (`<stepId>:wait`), not from the run's interruption: a run
 * whose process died after journaling a wait and before journaling `run.interrupted` is stalled,
 * and still listed and woken. A run a live process runs is left to it. (The same with a real
 * SIGKILL: test/runtime/sleepKill.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { runActivity } from "../../src/runtime/control/activity.ts";
import { deliverEvent } from "../../src/runtime/control/events.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { listWaits, wakeDueRuns } from "../../src/runtime/run/waits.ts";
import { diesAtInterruption } from "../support/diesAt.ts";
import { jsonJournal } from "../support/loop.ts";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const HOUR = 3_600_000;
const STEP = "pay#turn:0:tool:0";

/** A loop whose one call waits for a payment event (tokens handed out in `tokens`), then answers. */
function payingLoop(tokens: string[], runs: { tool: number }) {
  const pay: Tool = {
    description: "waits for the payment",
    execute: (_input, ctx) => {
      runs.tool++;
      const wait = ctx.waitForEvent({ timeoutMs: HOUR, what: "payment" });
      tokens.push(wait.token);
      return wait;
    },
  };
  const model = scriptedModel(({ messages }) =>
    messages.at(-1)?.role === "tool"
      ? { content: `paid: ${JSON.stringify((messages.at(-1) as { output: unknown }).output)}`, toolCalls: [] }
      : { toolCalls: [{ id: "p", name: "pay", input: {} }] },
  );
  return agentLoop$({ id: "pay", model, tools: { pay } });
}

describe("a wait whose run died before it stopped for it", () => {
  it("is listed, delivered to, and woken at once by wakeDueRuns; the tool is not run again", async () => {
    const store = memoryStore({ json: true });
    const tokens: string[] = [];
    const runs = { tool: 0 };
    const loop = payingLoop(tokens, runs);
    await expect(
      loop.run({ runId: "o", journal: jsonJournal(diesAtInterruption(store)), input: "buy", now: () => T0 }),
    ).rejects.toThrow("the process died");
    const journal = jsonJournal(store);
    expect((await readJournal(journal, "o")).some((e) => e.type === "run.interrupted")).toBe(false);
    expect((await runActivity(journal, "o")).activity).toBe("stalled");

    expect(await listWaits(journal)).toMatchObject([{ runId: "o", stepId: STEP, kind: "event", what: "payment" }]);
    const expiresAt = new Date(T0 + HOUR).toISOString();
    // Not due before its timeout, and nothing delivered yet: reported, not resumed.
    expect(await wakeDueRuns(journal, { loops: [loop], now: () => T0 + 1 })).toEqual([
      { runId: "o", loopId: "pay", dueAt: expiresAt, outcome: "not-due" },
    ]);

    await deliverEvent(journal, tokens[0] as string, { paid: 42 }, { now: () => T0 + 2 });
    expect(await listWaits(journal)).toEqual([]);
    expect(await wakeDueRuns(journal, { loops: [loop], now: () => T0 + 3 })).toEqual([
      { runId: "o", loopId: "pay", dueAt: undefined, ended: "event-delivered", outcome: "completed" },
    ]);
    expect(runs.tool).toBe(1);
    const entries = await readJournal(journal, "o");
    expect(entries.at(-1)).toMatchObject({ type: "run.completed", data: { output: { content: 'paid: {"paid":42}' } } });
  });

  it("is left to the live process that runs it, due or not", async () => {
    const journal = jsonJournal();
    let release: () => void = () => {};
    const holding = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holdStarted: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      holdStarted = resolve;
    });
    const nap: Tool = { description: "naps", execute: (_input, ctx) => ctx.sleep(HOUR, { result: "rested" }) };
    const hold: Tool = {
      description: "holds the turn open",
      execute: async () => {
        holdStarted();
        await holding;
        return "held";
      },
    };
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "n", name: "nap", input: {} },
          { id: "h", name: "hold", input: {} },
        ],
      },
      { content: "done", toolCalls: [] },
    ]);
    const loop = agentLoop$({ id: "nap", model, tools: { nap, hold } });
    const run = loop.run({ runId: "live", journal, input: "go", now: () => T0 }).catch((e: unknown) => e);
    await started;
    for (let i = 0; !(await readJournal(journal, "live")).some((e) => e.type === "decision.recorded"); i++) {
      if (i > 100) throw new Error("the wait was never journaled");
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await listWaits(journal)).toMatchObject([{ runId: "live", kind: "sleep" }]);
    // Due by the clock given, but a live process runs it: wakeDueRuns does not take it over.
    expect(await wakeDueRuns(journal, { loops: [loop], now: () => T0 + 2 * HOUR })).toEqual([]);
    release();
    expect(await run).toMatchObject({ run: { reason: "waiting" } });
  });
});

import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Model } from "../../src/models/types.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { crashingStore, jsonJournal } from "../support/loop.ts";

const TURNS = 10;

// Two calls a turn that finish out of order, a tool failing on every third turn.
const script = (turn: number): ModelResponse =>
  turn < TURNS
    ? {
        toolCalls: [
          { id: `s${turn}`, name: "slow", input: { turn } },
          { id: `f${turn}`, name: turn % 3 === 2 ? "broken" : "fast", input: { turn } },
        ],
      }
    : { content: `finished after ${turn} turns`, toolCalls: [] };

/**
 * The outside world's flakiness, shared by a run and its resume: the model answers each turn's
 * first request with a 503 and `fast` fails each call's first attempt; both are retried.
 */
interface Flaky {
  readonly modelTurns: Set<number>;
  readonly toolSteps: Set<string>;
}

function setup(mode: "full" | "lean", flaky?: Flaky) {
  const executions = new Map<string, number>();
  const count = (stepId: string) => executions.set(stepId, (executions.get(stepId) ?? 0) + 1);
  const tools: Record<string, Tool> = {
    slow: {
      description: "slow",
      execute: async (input, { stepId }) => {
        count(stepId);
        await new Promise((r) => setTimeout(r, 2));
        return { slow: (input as { turn: number }).turn, at: new Date(Date.UTC(2026, 0, 1)) };
      },
    },
    fast: {
      description: "fast",
      execute: (input, { stepId }) => {
        count(stepId);
        if (flaky && !flaky.toolSteps.has(stepId)) {
          flaky.toolSteps.add(stepId);
          throw new Error("flaky on purpose");
        }
        return { fast: (input as { turn: number }).turn };
      },
      ...(flaky ? { retry: { maxAttempts: 3, initialDelayMs: 1 } } : {}),
    },
    broken: {
      description: "always fails",
      execute: (_, { stepId }) => {
        count(stepId);
        throw new Error("broken on purpose");
      },
    },
  };
  const scripted = scriptedModel(({ turn }) => script(turn));
  const model: Model = flaky
    ? {
        generate: async (request) => {
          const turn = request.messages.filter((m) => m.role === "assistant").length;
          if (!flaky.modelTurns.has(turn)) {
            flaky.modelTurns.add(turn);
            throw Object.assign(new Error("busy"), { status: 503 });
          }
          return scripted.generate(request);
        },
      }
    : scripted;
  const retry = { model: { maxAttempts: 3, initialDelayMs: 1 } };
  return {
    loop: agentLoop$({ id: "cp", model, tools, toolCallLog: mode, maxIterations: 20, ...(flaky ? { retry } : {}) }),
    executions,
    model,
  };
}

describe.each(["full", "lean"] as const)("crash at every append point of a %s 10-turn run", (mode) => {
  it("each resume ends with the uninterrupted output; no completed frame's tool runs again", async () => {
    const reference = await setup(mode).loop.run({ runId: "r", input: "go", journal: jsonJournal() });
    let k = 0;
    for (; ; k++) {
      const store = memoryStore({ json: true });
      const { loop, executions } = setup(mode);
      const crashing = crashingStore(store, k);
      const first = await loop.run({ runId: "r", input: "go", journal: jsonJournal(crashing) }).then(
        () => "completed",
        () => "crashed",
      );
      if (first === "completed") break; // k is past the last append point
      const recorded = await readJournal(jsonJournal(store), "r");
      const completed = new Set(recorded.flatMap((e) => (e.type === "frame.completed" ? [e.data.frameId] : [])));
      const before = new Map(executions);
      const out = await loop.run({ runId: "r", input: "go", journal: jsonJournal(store) });
      expect(out).toEqual(reference);
      for (const id of completed) expect(executions.get(id), `${id} after a crash at append ${k}`).toBe(before.get(id));
      for (const [id, n] of executions) expect(n, `${id} ran more than twice`).toBeLessThanOrEqual(2);
    }
    // Write-ahead needs at least: run.started, each model call's frame.started (11), each turn's
    // first tool frame.started (10, with the model's completion), run.completed.
    expect(k).toBeGreaterThanOrEqual(1 + (TURNS + 1) + TURNS + 1);
  });
});

describe.each(["full", "lean"] as const)("crash at every append point of a %s run with retries in play", (mode) => {
  it("a model failing each turn once and a tool failing each call once: every resume ends as the uninterrupted run", async () => {
    const flaky = (): Flaky => ({ modelTurns: new Set(), toolSteps: new Set() });
    const reference = await setup(mode, flaky()).loop.run({ runId: "r", input: "go", journal: jsonJournal() });
    let k = 0;
    for (; ; k++) {
      const store = memoryStore({ json: true });
      const world = flaky();
      const { loop, executions } = setup(mode, world);
      const first = await loop.run({ runId: "r", input: "go", journal: jsonJournal(crashingStore(store, k)) }).then(
        () => "completed",
        () => "crashed",
      );
      if (first === "completed") break;
      const recorded = await readJournal(jsonJournal(store), "r");
      const completed = new Set(recorded.flatMap((e) => (e.type === "frame.completed" ? [e.data.frameId] : [])));
      const before = new Map(executions);
      const out = await loop.run({ runId: "r", input: "go", journal: jsonJournal(store) });
      expect(out).toEqual(reference);
      for (const id of completed) expect(executions.get(id), `${id} after a crash at append ${k}`).toBe(before.get(id));
      // A flaky call runs twice; a crash in its second attempt, once more.
      for (const [id, n] of executions) expect(n, `${id} ran more than three times`).toBeLessThanOrEqual(3);
      const failures = (await readJournal(jsonJournal(store), "r")).filter((e) => e.type === "attempt.failed");
      expect(failures.length).toBeGreaterThan(0);
    }
    // The plain run's append points, plus an attempt.failed for each turn's model and each fast call.
    expect(k).toBeGreaterThan(TURNS * 6);
  }, 60_000);
});

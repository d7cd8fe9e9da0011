import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isAgentLoopConfigError } from "../../src/core/errors.ts";
import { createJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { CallSettledData, Message, ModelResponse } from "../../src/events/types.ts";
import type { Model } from "../../src/models/types.ts";
import type { LeanAgentStep } from "../../src/projections/types.ts";
import type { AgentLoopConfig } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";

/**
 * One model response asking for far more tool calls than a run should make: the calls past
 * `maxToolCallsPerResponse` (default 128) are not run but settled as refused (`too-many-calls`,
 * status error, in one append) and fed back to the model with the limit; the calls within it run
 * once each, in batches, also when the limit is raised past a batch; and a resume from a reopened
 * file serves all of it from the journal.
 */

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-flood-");
});
afterAll(() => tmp.remove());

type ToolMessage = Extract<Message, { role: "tool" }>;

/** Asks for `calls` lookups at once, then answers; keeps what it was fed back. */
function floodingModel(calls: number): Model & { fed: ToolMessage[] } {
  const fed: ToolMessage[] = [];
  return {
    fed,
    async generate({ messages }): Promise<ModelResponse> {
      if (!messages.some((m) => m.role === "assistant")) {
        return {
          toolCalls: Array.from({ length: calls }, (_, i) => ({ id: `c${i}`, name: "lookup", input: { n: i } })),
        };
      }
      fed.push(...messages.filter((m): m is ToolMessage => m.role === "tool"));
      return { content: "done", toolCalls: [] };
    },
  };
}

function floodLoop(calls: number, extra: Partial<AgentLoopConfig> = {}) {
  const model = floodingModel(calls);
  const ran: number[] = [];
  const loop = agentLoop$({
    id: "flood",
    model,
    toolCallLog: "lean",
    tools: {
      lookup: {
        description: "looks n up",
        execute: (input: { n: number }) => {
          ran.push(input.n);
          return { n: input.n };
        },
      },
    },
    ...extra,
  });
  return { loop, model, ran };
}

describe("a model response with more tool calls than maxToolCallsPerResponse", () => {
  it("runs the first 128 by default and refuses the rest as too-many-calls, fed back to the model", async () => {
    const { loop, model, ran } = floodLoop(300);
    const journal = createJournal({ store: memoryStore({ json: true }) });
    const out = await loop.run({ runId: "default", input: "go", journal });
    expect(ran.sort((a, b) => a - b)).toEqual(Array.from({ length: 128 }, (_, i) => i));
    const log = out.toolCallLog as LeanAgentStep[];
    expect(log).toHaveLength(300);
    expect(log.map((s) => s.status)).toEqual([...Array(128).fill("ok"), ...Array(172).fill("error")]);
    expect(model.fed).toHaveLength(300);
    const refusal = model.fed[200];
    expect(refusal).toMatchObject({ toolCallId: "c200", isError: true, output: { error: "too-many-calls" } });
    expect((refusal?.output as { message: string } | undefined)?.message).toMatch(
      /asked for 300 tool calls.*at most 128/,
    );
    const entries = await readJournal(journal, "default");
    const settled = entries.filter((e) => e.type === "call.settled");
    expect(settled.map((e) => (e.data as CallSettledData).reason)).toEqual(Array(172).fill("too-many-calls"));
    expect(new Set(settled.map((e) => e.meta.at)).size, "refused in one append").toBe(1);
  });

  it("takes a configured limit, and a resume from a reopened file serves the refusals without running anything", async () => {
    const path = tmp.file("limit.db");
    const first = floodLoop(8, { maxToolCallsPerResponse: 5, maxIterations: 1 });
    const journal = openSqliteJournal(path);
    try {
      const stopped = await first.loop.run({ runId: "limited", input: "go", journal }).catch((e: unknown) => e);
      if (!isAgentInterruptedError(stopped)) throw stopped;
      expect(first.ran.sort()).toEqual([0, 1, 2, 3, 4]);
    } finally {
      await journal.close();
    }
    const again = floodLoop(8, { maxToolCallsPerResponse: 5 });
    const reopened = openSqliteJournal(path);
    try {
      const out = await again.loop.run({ runId: "limited", journal: reopened });
      expect(again.ran).toEqual([]);
      expect((out.toolCallLog as LeanAgentStep[]).map((s) => s.status)).toEqual([
        ...Array(5).fill("ok"),
        ...Array(3).fill("error"),
      ]);
      expect((again.model.fed[7]?.output as { message: string } | undefined)?.message).toMatch(
        /at most 5 calls at a time/,
      );
    } finally {
      await reopened.close();
    }
  });

  it("runs every call once when the limit is raised past a dispatch batch", async () => {
    const { loop, ran, model } = floodLoop(700, { maxToolCallsPerResponse: 1000 });
    const out = await loop.run({ runId: "raised", input: "go", journal: createJournal({ store: memoryStore() }) });
    expect(ran.sort((a, b) => a - b)).toEqual(Array.from({ length: 700 }, (_, i) => i));
    expect((out.toolCallLog as LeanAgentStep[]).every((s) => s.status === "ok")).toBe(true);
    expect(model.fed.map((m) => m.toolCallId)).toEqual(Array.from({ length: 700 }, (_, i) => `c${i}`));
  });

  it("lets timers run while it works through a long response (a worker's lease renewal must not starve)", async () => {
    const model = floodingModel(2000);
    let ticks = 0;
    const ticksSeen: number[] = [];
    const timer = setInterval(() => ticks++, 1);
    try {
      const loop = agentLoop$({
        id: "flood",
        model,
        maxToolCallsPerResponse: 2000,
        tools: { lookup: { description: "looks n up", execute: () => ticksSeen.push(ticks) } },
      });
      // Both the memory store and the tools answer without I/O: without a breath, one stretch of microtasks.
      await loop.run({ runId: "breathes", input: "go", journal: createJournal({ store: memoryStore() }) });
    } finally {
      clearInterval(timer);
    }
    expect(ticksSeen).toHaveLength(2000);
    expect(ticksSeen.at(-1), "timer ticks seen by the last call").toBeGreaterThan(0);
  });

  it("reports every call awaiting approval across batches", async () => {
    const model = floodingModel(300);
    const loop = agentLoop$({
      id: "flood",
      model,
      maxToolCallsPerResponse: 300,
      tools: { lookup: { description: "looks n up", requiresApproval: true, execute: () => ({}) } },
    });
    const stopped = await loop
      .run({ runId: "approvals", input: "go", journal: createJournal({ store: memoryStore() }) })
      .catch((e: unknown) => e);
    if (!isAgentInterruptedError(stopped)) throw stopped;
    expect(stopped.run.reason).toBe("approval-pending");
    expect(stopped.run.pendingApprovals.map((p) => p.stepId)).toEqual(
      Array.from({ length: 300 }, (_, i) => `flood#turn:0:tool:${i}`),
    );
  });

  it("refuses a limit that is not a positive integer (AgentLoopConfigError)", () => {
    for (const bad of [0, -1, 1.5, Number.NaN, "3"]) {
      let thrown: unknown;
      try {
        floodLoop(1, { maxToolCallsPerResponse: bad as number });
      } catch (e) {
        thrown = e;
      }
      expect(isAgentLoopConfigError(thrown), String(bad)).toBe(true);
      expect((thrown as Error).message).toMatch(/maxToolCallsPerResponse must be a positive integer/);
    }
  });
});

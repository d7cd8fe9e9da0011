/**
 * The log's type follows the configured mode (issue 22): `agentLoop$({ toolCallLog: "lean" })`
 * returns lean entries at the type level, "full" full ones, and ADR 0142 D5's union stays where
 * the mode is not known statically. `tsc --noEmit` checks the types (a `@ts-expect-error` that
 * stops erroring fails it); the runtime assertions check that the values agree.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import { scriptedModel } from "../../src/models/scripted.ts";
import type {
  AgentOutput,
  AgentStep,
  InterruptedAgentRun,
  LeanAgentStep,
  ToolCallLog,
  ToolCallLogMode,
} from "../../src/projections/types.ts";
import type { AgentLoopConfig, Tool } from "../../src/runtime/base/config.ts";
import { AgentInterruptedError, isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { type AgentLoop, agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const add: Tool<{ a: number; b: number }> = { description: "adds", execute: ({ a, b }) => ({ sum: a + b }) };
const script = () =>
  scriptedModel([{ toolCalls: [{ id: "c1", name: "add", input: { a: 1, b: 2 } }] }, { content: "3", toolCalls: [] }]);
const takesAgentSteps = (steps: AgentStep[]) => steps.length;
const takesLeanSteps = (steps: LeanAgentStep[]) => steps.map((s) => s.stepId);

describe("the log's type follows toolCallLog", () => {
  it('"lean": the output is AgentOutput<"lean"> and its entries have a stepId without narrowing', async () => {
    const loop = agentLoop$({ id: "lean", model: script(), tools: { add }, toolCallLog: "lean" });
    expectTypeOf(loop).toEqualTypeOf<AgentLoop<"lean">>();
    const out = await loop.run({ runId: "r", input: "1+2?", journal: jsonJournal() });
    expectTypeOf(out).toEqualTypeOf<AgentOutput<"lean">>();
    expectTypeOf(out.toolCallLog).toEqualTypeOf<LeanAgentStep[]>();
    expect(takesLeanSteps(out.toolCallLog)).toEqual(["lean#turn:0:tool:0"]);
    // @ts-expect-error a lean log is not a full one
    takesAgentSteps(out.toolCallLog);
  });

  it('"full": the entries are AgentStep[], passed on without isFullToolCallLog', async () => {
    const loop = agentLoop$({ id: "full", model: script(), tools: { add }, toolCallLog: "full" });
    const out = await loop.run({ runId: "r", input: "1+2?", journal: jsonJournal() });
    expectTypeOf(out.toolCallLog).toEqualTypeOf<AgentStep[]>();
    expect(takesAgentSteps(out.toolCallLog)).toBe(1);
    expect(out.toolCallLog[0]?.toolOutput).toEqual({ sum: 3 });
  });

  it("unset or not known statically: ADR 0142 D5's union", async () => {
    const unset = agentLoop$({ id: "unset", model: script(), tools: { add } });
    const out = await unset.run({ runId: "r", input: "1+2?", journal: jsonJournal() });
    expectTypeOf(out.toolCallLog).toEqualTypeOf<AgentStep[] | LeanAgentStep[]>();
    // @ts-expect-error unset follows the run's recorded pin, which may be lean
    takesAgentSteps(out.toolCallLog);

    const mode = (process.env.LOOM_TEST_MODE ?? "lean") as ToolCallLogMode;
    const dynamic = agentLoop$({ id: "dynamic", model: script(), tools: { add }, toolCallLog: mode });
    expectTypeOf(dynamic).toEqualTypeOf<AgentLoop<ToolCallLogMode>>();
    expectTypeOf<AgentOutput<ToolCallLogMode>["toolCallLog"]>().toEqualTypeOf<AgentStep[] | LeanAgentStep[]>();

    const config: AgentLoopConfig = { id: "from-config", model: script(), tools: { add }, toolCallLog: "lean" };
    expectTypeOf(agentLoop$(config).run).returns.resolves.toHaveProperty("toolCallLog").toEqualTypeOf<ToolCallLog>();
    expectTypeOf<AgentOutput>().toEqualTypeOf<AgentOutput<ToolCallLogMode | undefined>>();
    expectTypeOf<InterruptedAgentRun["toolCallLog"]>().toEqualTypeOf<AgentStep[] | LeanAgentStep[]>();
  });

  it("a typed loop still fits where any loop is taken (a worker's loops, submitRun)", () => {
    const loops: Record<string, AgentLoop> = {
      lean: agentLoop$({ id: "lean", model: script(), toolCallLog: "lean" }),
      full: agentLoop$({ id: "full", model: script(), toolCallLog: "full" }),
    };
    expect(Object.keys(loops)).toEqual(["lean", "full"]);
  });
});

describe("isAgentInterruptedError(e, loop) types the interrupted run's log in the loop's mode", () => {
  it("narrows a lean loop's interruption to lean entries", async () => {
    const loop = agentLoop$({ id: "k", model: script(), tools: { add }, toolCallLog: "lean", maxIterations: 1 });
    const e: unknown = await loop.run({ runId: "r", input: "1+2?", journal: jsonJournal() }).catch((x) => x);
    expect(isAgentInterruptedError(e, loop)).toBe(true);
    if (!isAgentInterruptedError(e, loop)) return;
    expectTypeOf(e.run.toolCallLog).toEqualTypeOf<LeanAgentStep[]>();
    expect(e.run.reason).toBe("max-iterations");
    expect(takesLeanSteps(e.run.toolCallLog)).toEqual(["k#turn:0:tool:0"]);
  });

  it("without a loop, or for a loop of the other mode, it stays honest", async () => {
    const lean = agentLoop$({ id: "k", model: script(), tools: { add }, toolCallLog: "lean", maxIterations: 1 });
    const e: unknown = await lean.run({ runId: "r", input: "1+2?", journal: jsonJournal() }).catch((x) => x);
    if (isAgentInterruptedError(e)) expectTypeOf(e.run.toolCallLog).toEqualTypeOf<ToolCallLog>();
    expect(isAgentInterruptedError(e)).toBe(true);
    const full = agentLoop$({ id: "k", model: script(), tools: { add }, toolCallLog: "full" });
    expect(isAgentInterruptedError(e, full)).toBe(false); // its entries are lean: not this loop's shape
    const empty = new AgentInterruptedError({
      runId: "r",
      reason: "aborted",
      toolCallLog: [],
      iterations: 0,
      pendingApprovals: [],
      waits: [],
    });
    expect([isAgentInterruptedError(empty, lean), isAgentInterruptedError(empty, full)]).toEqual([true, true]);
    expect(isAgentInterruptedError(new Error("x"), lean)).toBe(false);
  });
});

import { describe, expect, it } from "vitest";
import { modelFrameId, toolStepId } from "../../src/events/ids.ts";
import type { RunState } from "../../src/projections/runState.ts";
import { modelCallTokens, tokenUsage } from "../../src/projections/usage.ts";
import { usageOfRun } from "../../src/runtime/steps/budget.ts";

/** A folded run with these model frames (and a tool frame that reports a usage, never counted). */
function runWith(frames: Record<string, unknown>): RunState {
  const table: Record<string, unknown> = {
    [toolStepId("a", 0, 0)]: {
      frameId: toolStepId("a", 0, 0),
      status: "completed",
      output: { usage: { inputTokens: 999 } },
    },
  };
  for (const [frameId, frame] of Object.entries(frames)) table[frameId] = { frameId, ...(frame as object) };
  return { frames: table, decisions: {} } as unknown as RunState;
}

describe("a run's token usage, folded once", () => {
  const state = runWith({
    [modelFrameId("a", 0)]: {
      status: "completed",
      output: { toolCalls: [], usage: { inputTokens: 10, outputTokens: 4 } },
    },
    [modelFrameId("a", 1)]: { status: "completed", output: { toolCalls: [], usage: { inputTokens: 7 } } },
    [modelFrameId("a", 2)]: { status: "completed", output: { toolCalls: [] } },
    [modelFrameId("a", 3)]: { status: "completed", archived: { digest: "d" } },
    [modelFrameId("a", 4)]: { status: "started" },
  });

  it("reads each completed model call: its tokens, none reported, or archived", () => {
    expect([...modelCallTokens(state)]).toEqual([
      { inputTokens: 10, outputTokens: 4 },
      { inputTokens: 7, outputTokens: 0 },
      "none",
      "archived",
    ]);
  });

  it("gives the run's totals and the budget's count the same tokens", () => {
    expect(tokenUsage(state)).toEqual({ inputTokens: 17, outputTokens: 4, counted: 2, archived: 1 });
    const used = usageOfRun(state, undefined);
    expect({ inputTokens: used.inputTokens, outputTokens: used.outputTokens }).toEqual({
      inputTokens: 17,
      outputTokens: 4,
    });
    expect(used.modelCalls).toBe(4); // every completed call counts against the budget, archived or not
  });
});

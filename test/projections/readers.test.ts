import { describe, expect, it } from "vitest";
import { agentLoopEvalSubject, looksLikeError, toolNamesByIteration } from "../../src/projections/readers.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { projectToolCallLog } from "../../src/projections/toolCallLog.ts";
import type { AgentOutput } from "../../src/projections/types.ts";
import { buildRun, type RunPlan, withSeqs } from "./runBuilder.ts";

/** A run with an ok call, a tool that threw, a declined approval and an unknown tool (shapes as the loop feeds them). */
const plan: RunPlan = {
  loopId: "support",
  runId: "run-1",
  turns: [
    {
      calls: [
        { kind: "ok", name: "search", input: { q: "loom" }, output: { hits: ["a"] } },
        {
          kind: "failed",
          name: "fetch",
          input: { url: "x" },
          failure: { error: "TypeError", message: "fetch failed" },
        },
      ],
    },
    {
      calls: [
        {
          kind: "settled",
          name: "deploy",
          input: {},
          status: "error",
          reason: "approval-declined",
          result: { error: "approval-declined", message: "the call to deploy was declined" },
        },
      ],
    },
    {
      calls: [
        {
          kind: "settled",
          name: "nope",
          input: {},
          status: "error",
          reason: "unknown-tool",
          result: { error: "unknown-tool", message: "no tool named nope" },
        },
        { kind: "ok", name: "search", input: { q: "b" }, output: { error: "no results" } },
      ],
    },
  ],
  complete: true,
};
const state = foldEntries(withSeqs("run-1", buildRun(plan).entries));
const outputIn = (mode: "full" | "lean"): AgentOutput => ({
  content: "done",
  toolCallLog: projectToolCallLog(state, mode),
  iterations: 4,
});

describe("conversation reader: toolNamesByIteration", () => {
  it("reads the same tool names per iteration from both shapes", () => {
    const expected = [["search", "fetch"], ["deploy"], ["nope", "search"], []];
    expect(toolNamesByIteration(outputIn("full").toolCallLog, 4)).toEqual(expected);
    expect(toolNamesByIteration(outputIn("lean").toolCallLog, 4)).toEqual(expected);
  });

  it("without the iteration count, ends at the last iteration that called a tool", () => {
    expect(toolNamesByIteration(outputIn("lean").toolCallLog)).toHaveLength(3);
    expect(toolNamesByIteration([])).toEqual([]);
  });
});

describe("evals subject: agentLoopEvalSubject", () => {
  it("reads status on lean entries: the failed tool, the declined approval and the unknown tool are errors", () => {
    const subject = agentLoopEvalSubject(outputIn("lean"));
    expect(subject.toolCalls.map((c) => [c.toolName, c.isError])).toEqual([
      ["search", false],
      ["fetch", true],
      ["deploy", true],
      ["nope", true],
      ["search", false], // status ok: the tool ran and returned { error: … } as its value
    ]);
    expect(subject.toolCalls[0]?.stepId).toBe("support#turn:0:tool:0");
    expect(subject.toolErrors).toBe(3);
  });

  it("applies the output heuristic on full entries; a declined approval is an error in lean mode only (D6)", () => {
    // The heuristic judges what a tool returned. A refusal ({ error: "approval-declined" | "unknown-tool", … })
    // is what the loop fed for a call it did not run, so the heuristic does not count it; the lean
    // entry's status (the isError flag the model saw) does. This is the record's D6 difference.
    const subject = agentLoopEvalSubject(outputIn("full"));
    expect(subject.toolCalls.map((c) => [c.toolName, c.isError])).toEqual([
      ["search", false],
      ["fetch", true],
      ["deploy", false],
      ["nope", false],
      ["search", true], // a tool output with an error field counts in full mode
    ]);
    expect(subject.toolCalls[0]?.output).toEqual({ hits: ["a"] });
    expect(subject.toolErrors).toBe(2);
  });

  it("carries the content and the iteration count", () => {
    expect(agentLoopEvalSubject(outputIn("lean"))).toMatchObject({ content: "done", iterations: 4 });
  });
});

describe("looksLikeError", () => {
  it.each([
    [{ error: "TypeError", message: "x" }, true],
    [{ error: "outcome-unknown", message: "may have run" }, true],
    [{ isError: true }, true],
    [{ name: "RangeError", message: "too big" }, true],
    [{ error: "approval-declined", message: "declined" }, false],
    [{ error: "input-too-large", message: "big" }, false],
    [{ error: "invalid-input", message: "bad" }, false],
    [{ error: "unknown-tool", message: "none" }, false],
    [{ error: null }, false],
    [{ name: "Alice", message: "hi" }, false],
    [["error"], false],
    ["error", false],
    [null, false],
    [undefined, false],
  ])("%j → %s", (output, expected) => {
    expect(looksLikeError(output)).toBe(expected);
  });
});

/**
 * ADR 0142 D5, at the type level. `tsc --noEmit` (which covers test/) checks these: a
 * `@ts-expect-error` that stops erroring fails the typecheck. The runtime assertions keep vitest
 * honest about the values.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import { isFullToolCallLog, isLeanAgentStep, toLeanStep } from "../../src/projections/toolCallLog.ts";
import type { AgentOutput, AgentStep, InterruptedAgentRun, LeanAgentStep } from "../../src/projections/types.ts";

const full: AgentStep = { iteration: 0, toolName: "search", toolInput: { q: "x" }, toolOutput: { hits: [] } };
const lean: LeanAgentStep = toLeanStep(full, "support#turn:0:tool:0", "ok");
const output: AgentOutput = { content: "done", toolCallLog: [full], iterations: 2 };

function takesAgentSteps(steps: AgentStep[]): number {
  return steps.length;
}

describe("D5: the log's types", () => {
  it("AgentStep is unchanged: toolOutput is unknown and required", () => {
    expectTypeOf<AgentStep>().toHaveProperty("toolOutput").toEqualTypeOf<unknown>();
    // @ts-expect-error toolOutput is required on a full entry
    const missing: AgentStep = { iteration: 0, toolName: "t", toolInput: null };
    expect(missing).toBeDefined();
  });

  it("LeanAgentStep declares toolOutput as optional undefined, and carries status, bytes, digest, stepId", () => {
    expectTypeOf<LeanAgentStep["toolOutput"]>().toEqualTypeOf<undefined>();
    expectTypeOf<LeanAgentStep["status"]>().toEqualTypeOf<"ok" | "error">();
    expectTypeOf<LeanAgentStep["digest"]>().toEqualTypeOf<string | null>();
    expectTypeOf<LeanAgentStep>().toHaveProperty("bytes").toEqualTypeOf<number>();
    expectTypeOf<LeanAgentStep>().toHaveProperty("stepId").toEqualTypeOf<string>();
  });

  it("the log of AgentOutput and InterruptedAgentRun is AgentStep[] | LeanAgentStep[]", () => {
    expectTypeOf<AgentOutput["toolCallLog"]>().toEqualTypeOf<AgentStep[] | LeanAgentStep[]>();
    expectTypeOf<InterruptedAgentRun["toolCallLog"]>().toEqualTypeOf<AgentStep[] | LeanAgentStep[]>();
  });

  it("code that reads entry.toolOutput, or maps the log, still compiles on the union", () => {
    const outputs = output.toolCallLog.map((entry) => entry.toolOutput);
    expectTypeOf(outputs).toEqualTypeOf<unknown[]>();
    const first = output.toolCallLog[0]?.toolOutput;
    expectTypeOf(first).toEqualTypeOf<unknown>();
    const names: string[] = output.toolCallLog.map((e) => e.toolName);
    expect(names).toEqual(["search"]);
  });

  it("passing the whole log where AgentStep[] is wanted needs a narrowing", () => {
    // @ts-expect-error the log may be lean: the mode is runtime configuration
    takesAgentSteps(output.toolCallLog);
    if (isFullToolCallLog(output.toolCallLog)) {
      expect(takesAgentSteps(output.toolCallLog)).toBe(1);
    }
    // A lean entry is not an AgentStep either.
    // @ts-expect-error LeanAgentStep has no required toolOutput
    takesAgentSteps([lean]);
  });

  it("isLeanAgentStep narrows one entry", () => {
    const entry: AgentStep | LeanAgentStep = lean as AgentStep | LeanAgentStep;
    if (isLeanAgentStep(entry)) {
      expectTypeOf(entry).toEqualTypeOf<LeanAgentStep>();
      expect(entry.digest).toBe(lean.digest);
    } else {
      expectTypeOf(entry).toEqualTypeOf<AgentStep>();
    }
  });
});

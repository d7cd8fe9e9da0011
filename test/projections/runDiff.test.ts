import { describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/core/canonicalJson.ts";
import { digestOf } from "../../src/core/digest.ts";
import { diffRuns, jsonPatch } from "../../src/projections/runDiff.ts";
import { toLeanStep } from "../../src/projections/toolCallLog.ts";
import type { AgentStep } from "../../src/projections/types.ts";
import { alignmentProblems, applyPatch, diffCase, generate, lean, mutationCases } from "../support/logMutations.ts";

describe("diffRuns aligns a generated mutation suite (600 cases)", () => {
  it("pairs every call with its origin and names every change", () => {
    const cases = mutationCases(600);
    for (const { seed, mutations, shape } of cases) {
      const { a, b } = generate(seed, mutations);
      expect(
        alignmentProblems(a, b, shape, diffCase(a, b, shape)),
        `seed ${seed} (${shape}, ${mutations.join("+")})`,
      ).toEqual([]);
    }
    expect(cases).toHaveLength(600);
    expect(new Set(cases.map((c) => c.mutations.join("+"))).size).toBeGreaterThan(50);
  });

  it("calls a log and its own copy identical, in every match mode", () => {
    for (let seed = 1; seed <= 50; seed++) {
      const { a } = generate(seed, []);
      for (const match of ["strict", "unordered", "subset", "superset"] as const) {
        const diff = diffRuns(lean(a), lean(a), { match });
        expect(diff.identical).toBe(true);
        expect(diff.pass).toBe(true);
        expect(diff.firstDivergence).toBeUndefined();
        expect(diff.counts.same).toBe(a.length);
      }
    }
  });
});

describe("diffRuns", () => {
  const step = (iteration: number, toolName: string, toolInput: unknown, toolOutput: unknown = "ok"): AgentStep => ({
    iteration,
    toolName,
    toolInput,
    toolOutput,
  });
  const a = [
    step(0, "search", { q: "shoes" }),
    step(0, "fetch", { id: 1, fields: "all" }),
    step(1, "write", { text: "done" }),
  ];

  it("judges each match mode by what it forgives", () => {
    const reordered = [a[1], a[0], a[2]] as AgentStep[];
    const fewer = [a[0], a[2]] as AgentStep[];
    const more = [...a, step(2, "search", { q: "boots" })];
    const verdicts = (b: AgentStep[]) =>
      (["strict", "unordered", "subset", "superset"] as const).map((match) => diffRuns(a, b, { match }).pass);
    expect(verdicts(reordered)).toEqual([false, true, true, true]);
    expect(verdicts(fewer)).toEqual([false, false, true, false]);
    expect(verdicts(more)).toEqual([false, false, false, true]);
  });

  it("reads a full log and its lean form as the same calls", () => {
    const leanA = a.map((s, i) => toLeanStep(s, `l#turn:${s.iteration}:tool:${i}`, "ok"));
    const diff = diffRuns(a, leanA);
    expect(diff.identical).toBe(true);
    expect(diff.calls[0]?.b?.outputDigest).toBe(digestOf("ok").digest);
  });

  it("names the first divergence: the prompt before the model's answer before a tool's input", () => {
    const model = (turn: number, prompt: string, output: string) => ({
      turn,
      stepId: `l#turn:${turn}:model`,
      promptDigest: prompt,
      outputDigest: output,
    });
    const base = {
      toolCallLog: a,
      content: "done",
      iterations: 3,
      modelCalls: [model(0, "p0", "o0"), model(1, "p1", "o1"), model(2, "p2", "o2")],
    };
    const promptChanged = { ...base, modelCalls: [model(0, "p0*", "o0"), ...base.modelCalls.slice(1)] };
    expect(diffRuns(base, promptChanged).firstDivergence).toEqual({
      turn: 0,
      stepId: "l#turn:0:model",
      what: "prompt",
    });

    const inputChanged = {
      ...base,
      toolCallLog: [a[0], step(0, "fetch", { id: 2, fields: "all" }), a[2]] as AgentStep[],
      modelCalls: [model(0, "p0", "o0*"), ...base.modelCalls.slice(1)],
    };
    const divergence = diffRuns(base, inputChanged).firstDivergence;
    expect(divergence?.what).toBe("tool-input");
    expect(divergence?.turn).toBe(0);
    expect(divergence?.call?.patch).toEqual([{ op: "replace", path: "/id", value: 2 }]);

    const answerOnly = { ...base, content: "finished" };
    const diff = diffRuns(base, answerOnly);
    expect(diff.firstDivergence?.what).toBe("answer");
    expect(diff.answer).toEqual({ same: false, a: "done", b: "finished" });
    expect(diff.pass).toBe(false);
    expect(diffRuns(base, answerOnly, { match: "unordered" }).pass).toBe(true);
  });

  it("calls a call that kept fewer than half its input's leaves a new one, unless told otherwise", () => {
    const b = [a[0], step(0, "fetch", { id: 9, fields: "some" }), a[2]] as AgentStep[];
    expect(diffRuns(a, b).counts).toMatchObject({ removed: 1, added: 1, "input-changed": 0 });
    const loose = diffRuns(a, b, { inputSimilarity: 0 });
    expect(loose.counts).toMatchObject({ removed: 0, added: 0, "input-changed": 1 });
    expect(loose.calls[1]?.patch).toEqual([
      { op: "replace", path: "/fields", value: "some" },
      { op: "replace", path: "/id", value: 9 },
    ]);
  });

  it("gives the deltas of what both sides counted", () => {
    const diff = diffRuns(
      { toolCallLog: a, iterations: 3, usage: { modelCalls: 3, inputTokens: 100, outputTokens: 40, cost: 0.5 } },
      { toolCallLog: a.slice(0, 2), iterations: 2, usage: { modelCalls: 2, inputTokens: 70 } },
    );
    expect(diff.deltas).toEqual({
      toolCalls: { a: 3, b: 2, delta: -1 },
      modelCalls: { a: 3, b: 2, delta: -1 },
      inputTokens: { a: 100, b: 70, delta: -30 },
      iterations: { a: 3, b: 2, delta: -1 },
    });
  });

  it("refuses a side that is not a log, and an unknown match mode, by name", () => {
    expect(() => diffRuns(a, {} as never)).toThrow(/toolCallLog array/);
    expect(() => diffRuns(a, a, { match: "loose" as never })).toThrow(/strict, unordered, subset or superset/);
    expect(() => diffRuns(a, a, { inputSimilarity: 2 })).toThrow(/inputSimilarity/);
  });
});

describe("jsonPatch", () => {
  it("turns one value into the other, canonically ordered, escaping pointer characters", () => {
    const from = { b: [1, 2, 3], "a/b": { "~x": 1 }, gone: true };
    const to = { b: [1, 5], "a/b": { "~x": 2 }, added: null };
    const patch = jsonPatch(from, to);
    expect(patch).toEqual([
      { op: "replace", path: "/a~1b/~0x", value: 2 },
      { op: "add", path: "/added", value: null },
      { op: "replace", path: "/b/1", value: 5 },
      { op: "remove", path: "/b/2" },
      { op: "remove", path: "/gone" },
    ]);
    expect(canonicalJson(applyPatch(from, patch))).toBe(canonicalJson(to));
    expect(jsonPatch({ x: [1] }, { x: [1] })).toEqual([]);
    expect(jsonPatch(1, "1")).toEqual([{ op: "replace", path: "", value: "1" }]);
  });
});

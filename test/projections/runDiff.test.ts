import { describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/core/canonicalJson.ts";
import { digestOf } from "../../src/core/digest.ts";
import { type CallChange, diffRuns, type JsonPatchOperation, jsonPatch } from "../../src/projections/runDiff.ts";
import { toLeanStep } from "../../src/projections/toolCallLog.ts";
import type { AgentStep, LeanAgentStep } from "../../src/projections/types.ts";

/** A small seeded generator (mulberry32): the suite is the same on every run. */
function random(seed: number): () => number {
  let t = seed >>> 0;
  return () => {
    t = (t + 0x6d2b79f5) >>> 0;
    let x = Math.imul(t ^ (t >>> 15), 1 | t);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** One call of a generated log, with the tag of the original call it stands for (ground truth). */
interface Tagged {
  tag: number;
  step: AgentStep;
  status: "ok" | "error";
  inputChanged: boolean;
  /** The input leaves an argument change touched (at most two of five: it stays the same call). */
  changedLeaves?: ReadonlySet<number>;
  resultChanged: boolean;
}

const TOOLS = ["search", "fetch", "write"];

function applyPatch(value: unknown, patch: readonly JsonPatchOperation[]): unknown {
  const root = { v: structuredClone(value) as unknown };
  for (const op of patch) {
    const parts =
      op.path === ""
        ? []
        : op.path
            .slice(1)
            .split("/")
            .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"));
    if (parts.length === 0) {
      if (op.op === "remove") root.v = undefined;
      else root.v = op.value;
      continue;
    }
    let parent = root.v as Record<string, unknown> | unknown[];
    for (const p of parts.slice(0, -1)) parent = (parent as Record<string, unknown>)[p] as Record<string, unknown>;
    const last = parts[parts.length - 1] as string;
    if (Array.isArray(parent)) {
      const i = Number(last);
      if (op.op === "add") parent.splice(i, 0, op.value);
      else if (op.op === "remove") parent.splice(i, 1);
      else parent[i] = op.value;
    } else if (op.op === "remove") delete parent[last];
    else parent[last] = op.value;
  }
  return root.v;
}

/** Longest increasing subsequence length (patience sorting): the calls that can stay in order. */
function lisLength(xs: readonly number[]): number {
  const tails: number[] = [];
  for (const x of xs) {
    let lo = 0;
    let hi = tails.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((tails[mid] as number) < x) lo = mid + 1;
      else hi = mid;
    }
    tails[lo] = x;
  }
  return tails.length;
}

type Mutation = "insert" | "delete" | "reorder" | "argument" | "status";

/** Builds a log, mutates a copy, and keeps the truth of what each call became. */
function generate(seed: number, mutations: readonly Mutation[]) {
  const rnd = random(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  let fresh = 0;
  const freshValue = () => `v${seed}-${fresh++}`;
  const newCall = (iteration: number): AgentStep => ({
    iteration,
    toolName: pick(TOOLS),
    toolInput: {
      id: freshValue(),
      q: freshValue(),
      opts: { limit: 1000 + fresh++, tags: [freshValue(), freshValue()] },
    },
    toolOutput: { found: freshValue() },
  });
  const n = 4 + Math.floor(rnd() * 14);
  const a: Tagged[] = [];
  for (let i = 0; i < n; i++) {
    a.push({
      tag: i,
      step: newCall(Math.floor(i / 2)),
      status: rnd() < 0.8 ? "ok" : "error",
      inputChanged: false,
      resultChanged: false,
    });
  }
  const b: Tagged[] = a.map((t) => ({ ...t }));
  for (const mutation of mutations) {
    if (mutation === "insert") {
      const at = Math.floor(rnd() * (b.length + 1));
      const near = b[Math.min(at, b.length - 1)]?.step.iteration ?? 0;
      b.splice(at, 0, { tag: -1, step: newCall(near), status: "ok", inputChanged: false, resultChanged: false });
    } else if (mutation === "delete" && b.length > 1) {
      b.splice(Math.floor(rnd() * b.length), 1);
    } else if (mutation === "reorder" && b.length > 1) {
      const from = Math.floor(rnd() * b.length);
      const [moved] = b.splice(from, 1);
      let to = Math.floor(rnd() * (b.length + 1));
      if (to === from) to = (to + 1) % (b.length + 1);
      b.splice(to, 0, moved as Tagged);
    } else if (mutation === "argument") {
      const at = Math.floor(rnd() * b.length);
      const call = b[at] as Tagged;
      const input = structuredClone(call.step.toolInput) as { q: string; opts: { limit: number; tags: string[] } };
      const before = call.changedLeaves ?? new Set<number>();
      let which = Math.floor(rnd() * 3);
      if (before.size === 2 && !before.has(which)) which = [...before][0] as number;
      if (which === 0) input.q = freshValue();
      else if (which === 1) input.opts.limit = 5000 + fresh++;
      else input.opts.tags[1] = freshValue();
      b[at] = {
        ...call,
        step: { ...call.step, toolInput: input },
        inputChanged: call.tag >= 0,
        changedLeaves: new Set([...before, which]),
      };
    } else if (mutation === "status") {
      const at = Math.floor(rnd() * b.length);
      const call = b[at] as Tagged;
      b[at] = {
        ...call,
        status: call.status === "ok" ? "error" : "ok",
        step: { ...call.step, toolOutput: { failed: freshValue() } },
        resultChanged: call.tag >= 0,
      };
    }
  }
  return { a, b };
}

const lean = (log: readonly Tagged[]): LeanAgentStep[] =>
  log.map((t, i) => toLeanStep(t.step, `loop#turn:${t.step.iteration}:tool:${i}`, t.status));

describe("diffRuns aligns a generated mutation suite (600 cases)", () => {
  const kinds: Mutation[] = ["insert", "delete", "reorder", "argument", "status"];
  const cases: { seed: number; mutations: Mutation[]; shape: "lean" | "full" }[] = [];
  for (let seed = 1; seed <= 600; seed++) {
    const rnd = random(seed * 7919);
    const bucket = seed % 6;
    const mutations =
      bucket < 5
        ? [kinds[bucket] as Mutation]
        : Array.from({ length: 2 + Math.floor(rnd() * 4) }, () => kinds[Math.floor(rnd() * kinds.length)] as Mutation);
    cases.push({ seed, mutations, shape: seed % 2 === 0 ? "lean" : "full" });
  }

  it("pairs every call with its origin and names every change", () => {
    let checked = 0;
    for (const { seed, mutations, shape } of cases) {
      const { a, b } = generate(seed, mutations);
      const diff =
        shape === "lean"
          ? diffRuns(lean(a), lean(b))
          : diffRuns(
              a.map((t) => t.step),
              b.map((t) => t.step),
            );
      const where = `seed ${seed} (${shape}, ${mutations.join("+")})`;
      // Every b call is aligned with the a call it came from, or added.
      const pairs = diff.calls.filter((c) => c.a && c.b).map((c) => [c.a?.index, c.b?.index]);
      const expectedPairs = b.flatMap((t, j) => (t.tag >= 0 ? [[a.findIndex((x) => x.tag === t.tag), j]] : []));
      expect(
        pairs.sort((x, y) => (x[1] as number) - (y[1] as number)),
        where,
      ).toEqual(expectedPairs);
      const kept = new Set(b.map((t) => t.tag));
      expect(
        diff.calls
          .filter((c) => c.change === "removed")
          .map((c) => c.a?.index)
          .sort((x, y) => (x as number) - (y as number)),
        where,
      ).toEqual(a.flatMap((t, i) => (kept.has(t.tag) ? [] : [i])));
      expect(diff.counts.added, where).toBe(b.filter((t) => t.tag < 0).length);
      // Each aligned call is named by what happened to it.
      for (const call of diff.calls.filter((c) => c.a && c.b)) {
        const truth = b[call.b?.index as number] as Tagged;
        const expected: CallChange[] = truth.inputChanged
          ? ["input-changed"]
          : truth.resultChanged
            ? [shape === "lean" ? "status-changed" : "output-changed"]
            : ["same", "reordered"];
        expect(expected, `${where}: b[${call.b?.index}] is ${call.change}`).toContain(call.change);
        if (call.change === "input-changed") {
          expect(call.patch?.length, where).toBe(truth.changedLeaves?.size);
          expect(canonicalJson(applyPatch(a[call.a?.index as number]?.step.toolInput, call.patch ?? [])), where).toBe(
            canonicalJson(truth.step.toolInput),
          );
        }
      }
      // As few calls as possible are called reordered: the rest keep their order (an LIS).
      const keyEqual = b.flatMap((t) => (t.tag >= 0 && !t.inputChanged ? [a.findIndex((x) => x.tag === t.tag)] : []));
      const inOrder = diff.calls.filter(
        (c) => c.a && c.b && c.change !== "reordered" && c.change !== "input-changed" && !c.moved,
      ).length;
      expect(inOrder, where).toBe(lisLength(keyEqual));
      expect(diff.identical, where).toBe(false);
      checked++;
    }
    expect(checked).toBe(600);
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

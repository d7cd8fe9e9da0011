import { canonicalJson } from "../../src/core/canonicalJson.ts";
import { type CallChange, diffRuns, type JsonPatchOperation, type RunDiff } from "../../src/projections/runDiff.ts";
import { toLeanStep } from "../../src/projections/toolCallLog.ts";
import type { AgentStep, LeanAgentStep } from "../../src/projections/types.ts";

/**
 * A generated suite of tool-call log mutations with their ground truth (what each call of the
 * mutated log came from, and what happened to it), and a checker of a diff against it: used by
 * test/projections/runDiff.test.ts and bench/diff.ts.
 */

/** A small seeded generator (mulberry32): the suite is the same on every run. */
export function random(seed: number): () => number {
  let t = seed >>> 0;
  return () => {
    t = (t + 0x6d2b79f5) >>> 0;
    let x = Math.imul(t ^ (t >>> 15), 1 | t);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** One call of a generated log, with the tag of the original call it stands for (ground truth). */
export interface Tagged {
  tag: number;
  step: AgentStep;
  status: "ok" | "error";
  inputChanged: boolean;
  /** The input leaves an argument change touched (at most two of five: it stays the same call). */
  changedLeaves?: ReadonlySet<number>;
  resultChanged: boolean;
}

const TOOLS = ["search", "fetch", "write"];

export function applyPatch(value: unknown, patch: readonly JsonPatchOperation[]): unknown {
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
export function lisLength(xs: readonly number[]): number {
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

export type Mutation = "insert" | "delete" | "reorder" | "argument" | "status";

/** Builds a log, mutates a copy, and keeps the truth of what each call became. */
export function generate(seed: number, mutations: readonly Mutation[]) {
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

export const lean = (log: readonly Tagged[]): LeanAgentStep[] =>
  log.map((t, i) => toLeanStep(t.step, `loop#turn:${t.step.iteration}:tool:${i}`, t.status));

/** The suite: 600 cases, a hundred of each single mutation and a hundred mixes of two to five. */
export function mutationCases(count = 600): { seed: number; mutations: Mutation[]; shape: "lean" | "full" }[] {
  const kinds: Mutation[] = ["insert", "delete", "reorder", "argument", "status"];
  const cases: { seed: number; mutations: Mutation[]; shape: "lean" | "full" }[] = [];
  for (let seed = 1; seed <= count; seed++) {
    const rnd = random(seed * 7919);
    const bucket = seed % 6;
    const mutations =
      bucket < 5
        ? [kinds[bucket] as Mutation]
        : Array.from({ length: 2 + Math.floor(rnd() * 4) }, () => kinds[Math.floor(rnd() * kinds.length)] as Mutation);
    cases.push({ seed, mutations, shape: seed % 2 === 0 ? "lean" : "full" });
  }
  return cases;
}

/** Diffs one case's logs. */
export function diffCase(a: readonly Tagged[], b: readonly Tagged[], shape: "lean" | "full"): RunDiff {
  return shape === "lean"
    ? diffRuns(lean(a), lean(b))
    : diffRuns(
        a.map((t) => t.step),
        b.map((t) => t.step),
      );
}

/**
 * What is wrong with a diff of one case, by its ground truth: every call of b aligned with the
 * call of a it came from (or added), every call of a dropped called removed, each aligned call
 * named by what happened to it (a changed input with the patch that makes it), and as few calls
 * called reordered as the longest run kept in order allows. Empty when all is right.
 */
export function alignmentProblems(
  a: readonly Tagged[],
  b: readonly Tagged[],
  shape: "lean" | "full",
  diff: RunDiff,
): string[] {
  const problems: string[] = [];
  const pairs = diff.calls
    .filter((c) => c.a && c.b)
    .map((c) => [c.a?.index, c.b?.index] as [number, number])
    .sort((x, y) => x[1] - y[1]);
  const expectedPairs = b.flatMap((t, j) => (t.tag >= 0 ? [[a.findIndex((x) => x.tag === t.tag), j]] : []));
  if (JSON.stringify(pairs) !== JSON.stringify(expectedPairs))
    problems.push(`pairs ${JSON.stringify(pairs)} ≠ ${JSON.stringify(expectedPairs)}`);
  const kept = new Set(b.map((t) => t.tag));
  const removed = diff.calls
    .filter((c) => c.change === "removed")
    .map((c) => c.a?.index as number)
    .sort((x, y) => x - y);
  const expectedRemoved = a.flatMap((t, i) => (kept.has(t.tag) ? [] : [i]));
  if (JSON.stringify(removed) !== JSON.stringify(expectedRemoved))
    problems.push(`removed ${removed} ≠ ${expectedRemoved}`);
  const added = b.filter((t) => t.tag < 0).length;
  if (diff.counts.added !== added) problems.push(`added ${diff.counts.added} ≠ ${added}`);
  for (const call of diff.calls.filter((c) => c.a && c.b)) {
    const truth = b[call.b?.index as number] as Tagged;
    const expected: CallChange[] = truth.inputChanged
      ? ["input-changed"]
      : truth.resultChanged
        ? [shape === "lean" ? "status-changed" : "output-changed"]
        : ["same", "reordered"];
    if (!expected.includes(call.change))
      problems.push(`b[${call.b?.index}] is ${call.change}, expected ${expected.join(" or ")}`);
    if (call.change === "input-changed") {
      if (call.patch?.length !== truth.changedLeaves?.size)
        problems.push(`b[${call.b?.index}] patch of ${call.patch?.length} ops`);
      const patched = canonicalJson(applyPatch(a[call.a?.index as number]?.step.toolInput, call.patch ?? []));
      if (patched !== canonicalJson(truth.step.toolInput))
        problems.push(`b[${call.b?.index}] patch does not make b's input`);
    }
  }
  const keyEqual = b.flatMap((t) => (t.tag >= 0 && !t.inputChanged ? [a.findIndex((x) => x.tag === t.tag)] : []));
  const inOrder = diff.calls.filter(
    (c) => c.a && c.b && c.change !== "reordered" && c.change !== "input-changed" && !c.moved,
  ).length;
  if (inOrder !== lisLength(keyEqual))
    problems.push(`${inOrder} calls kept in order, the most that can be is ${lisLength(keyEqual)}`);
  if (diff.identical) problems.push("called identical");
  return problems;
}

import { canonicalJsonOfParsed } from "../core/canonicalJson.ts";
import { digestOf, digestOfRecorded } from "../core/digest.ts";
import { jsonRoundTrip } from "../core/jsonForm.ts";
import { parseFrameId } from "../events/ids.ts";
import type { RunState } from "./runState.ts";
import type { AgentStep, LeanAgentStep } from "./types.ts";
import { tokenUsage } from "./usage.ts";

/**
 * How two tool-call logs must relate for a diff to pass (`RunDiff.pass`):
 * - `strict`: the same calls in the same order, each with the same status and output.
 * - `unordered`: the same calls (tool and input), in any order, each with the same status and output.
 * - `subset`: every call of `b` is in `a` (b did no call that a did not do); order and extra calls of `a` are ignored.
 * - `superset`: every call of `a` is in `b` (b did at least what a did); order and extra calls of `b` are ignored.
 */
export type DiffMatchMode = "strict" | "unordered" | "subset" | "superset";

/** What happened to one call between run `a` and run `b`. */
export type CallChange =
  | "same"
  | "input-changed"
  | "added"
  | "removed"
  | "reordered"
  | "status-changed"
  | "output-changed";

/** One JSON Patch operation (RFC 6902) turning `a`'s canonical input into `b`'s. */
export type JsonPatchOperation =
  | { readonly op: "add"; readonly path: string; readonly value: unknown }
  | { readonly op: "remove"; readonly path: string }
  | { readonly op: "replace"; readonly path: string; readonly value: unknown };

/** One call of one side, as the diff saw it. */
export interface DiffCallSide {
  /** Its position in that side's log (0-based). */
  readonly index: number;
  readonly iteration: number;
  readonly toolName: string;
  /** sha256 hex of the canonical JSON of the input (null when the input has no JSON form). */
  readonly inputDigest: string | null;
  /** `ok` or `error` when the side says (a lean log always does); undefined for a full log's entry. */
  readonly status?: "ok" | "error";
  /** The output's digest: the lean entry's, or the digest of the full entry's `toolOutput`. */
  readonly outputDigest: string | null;
  /** The tool frame id, when the side carries it (lean logs and runs do). */
  readonly stepId?: string;
}

/** One aligned call of the diff: the call in `a`, in `b`, or both, and what changed. */
export interface DiffCall {
  readonly change: CallChange;
  readonly a?: DiffCallSide;
  readonly b?: DiffCallSide;
  /** For `input-changed`: the patch from `a`'s canonical input to `b`'s. */
  readonly patch?: readonly JsonPatchOperation[];
  /** Set on a `status-changed` or `output-changed` call that was also made in another order. */
  readonly moved?: true;
}

/** One model call of a side: its turn, frame id, and the digests of what it was fed and answered. */
export interface DiffModelCall {
  readonly turn: number;
  readonly stepId: string;
  /** The digest of the prompt the call was fed (the model frame's input digest). */
  readonly promptDigest: string | null;
  /** The digest of the model's recorded response. */
  readonly outputDigest: string | null;
}

/** What a side's run spent. Any figure a side lacks is left out of the deltas. */
export interface DiffUsage {
  readonly modelCalls?: number;
  readonly inputTokens?: number;
  readonly outputTokens?: number;
  readonly cost?: number;
}

/**
 * One side of a diff: a tool-call log (full or lean), and what else is known of the run. Build
 * it from a folded run with {@link runDiffSideOf}, or pass a bare log to {@link diffRuns}.
 */
export interface RunDiffSide {
  readonly toolCallLog: readonly AgentStep[] | readonly LeanAgentStep[];
  /** The final answer, when the run completed. */
  readonly content?: string;
  /** Model calls made. */
  readonly iterations?: number;
  readonly usage?: DiffUsage;
  /** The run's model calls in turn order, for the first divergence's prompt and model-output checks. */
  readonly modelCalls?: readonly DiffModelCall[];
}

/** Where the two runs first went apart, and what differed there. */
export interface FirstDivergence {
  /** The turn (0-based model call) where they went apart. */
  readonly turn: number;
  /** The step id there: the model frame for `prompt`/`model-output`, else the call's tool frame (b's when it has one). */
  readonly stepId?: string;
  /**
   * `prompt`: the model was fed something else; `model-output`: the same prompt got another
   * answer; `tool-input`, `tool-calls`, `tool-status`, `tool-output`: the first call that differs;
   * `answer`: every call the same, the final answers not; `length`: one run made more model calls.
   */
  readonly what:
    | "prompt"
    | "model-output"
    | "tool-input"
    | "tool-calls"
    | "tool-status"
    | "tool-output"
    | "answer"
    | "length";
  /** The first differing call, for the tool kinds. */
  readonly call?: DiffCall;
}

/** A figure of `a`, of `b`, and `b - a`. */
export interface Delta {
  readonly a: number;
  readonly b: number;
  readonly delta: number;
}

/** The structural diff of two runs' tool-call logs (see {@link diffRuns}). */
export interface RunDiff {
  /** The match mode the diff was judged in. */
  readonly match: DiffMatchMode;
  /** Every call of both sides aligned, in `b`'s order, with the calls only `a` made placed after the call they followed. */
  readonly calls: readonly DiffCall[];
  /** How many calls of each kind of change. */
  readonly counts: Readonly<Record<CallChange, number>>;
  /** True when every call is `same`, in order, and the answers (when both given) are equal. */
  readonly identical: boolean;
  /** Whether `b` meets `a` in the match mode. */
  readonly pass: boolean;
  /** Where they first went apart; undefined when identical. */
  readonly firstDivergence?: FirstDivergence;
  /** Figures of both runs, where both sides give them. */
  readonly deltas: {
    readonly toolCalls: Delta;
    readonly modelCalls?: Delta;
    readonly inputTokens?: Delta;
    readonly outputTokens?: Delta;
    readonly cost?: Delta;
    readonly iterations?: Delta;
  };
  /** The final answers, when both sides give them. */
  readonly answer?: { readonly same: boolean; readonly a: string; readonly b: string };
}

/** Options of {@link diffRuns}. */
export interface DiffOptions {
  /** How `b` must relate to `a` to pass; `strict` by default. */
  readonly match?: DiffMatchMode;
  /**
   * How alike two inputs of one tool must be to count as one call whose input changed rather
   * than one call removed and another added: the share of the inputs' leaves (values at a JSON
   * path) both have alike, 0 to 1 (0.5 by default). A call that keeps fewer is a new call; 0
   * pairs any two calls of one tool left over.
   */
  readonly inputSimilarity?: number;
}

/** A call prepared for alignment. */
interface Call extends DiffCallSide {
  readonly key: string;
  readonly input: unknown;
}

const CHANGES: readonly CallChange[] = [
  "same",
  "input-changed",
  "added",
  "removed",
  "reordered",
  "status-changed",
  "output-changed",
];

/**
 * The structural diff of two tool-call logs (full or lean, or one of each), or of two runs.
 * Calls are aligned over (tool name, input digest): the longest common subsequence keeps the
 * calls made in the same order (`same`, or `status-changed`/`output-changed` when the result
 * differs); a call made by both in another order is `reordered`; a call of one tool whose input
 * changed but mostly kept its leaves is `input-changed` with a JSON Patch between the canonical
 * inputs; what is left is `removed` (only in `a`) or `added` (only in `b`). It reads nothing and
 * has no clock: the same two sides always give the same diff.
 *
 * @example
 * ```ts
 * const before = runDiffSideOf(await foldRun(journal, "r-1"));
 * const after = runDiffSideOf(await foldRun(replayJournal, "r-1"));
 * const diff = diffRuns(before, after, { match: "superset" });
 * if (!diff.pass) console.log(diff.firstDivergence, diff.counts);
 * ```
 */
export function diffRuns(
  a: RunDiffSide | readonly AgentStep[] | readonly LeanAgentStep[],
  b: RunDiffSide | readonly AgentStep[] | readonly LeanAgentStep[],
  options: DiffOptions = {},
): RunDiff {
  const match = options.match ?? "strict";
  if (!["strict", "unordered", "subset", "superset"].includes(match)) {
    throw new TypeError(`diffRuns: match must be strict, unordered, subset or superset (got ${String(match)})`);
  }
  const similarity = options.inputSimilarity ?? 0.5;
  if (!(similarity >= 0 && similarity <= 1)) {
    throw new TypeError(`diffRuns: inputSimilarity must be a number from 0 to 1 (got ${String(similarity)})`);
  }
  const sideA = asSide(a);
  const sideB = asSide(b);
  const callsA = sideA.toolCallLog.map(callOf);
  const callsB = sideB.toolCallLog.map(callOf);
  const calls = align(callsA, callsB, similarity);

  const counts = Object.fromEntries(CHANGES.map((c) => [c, 0])) as Record<CallChange, number>;
  for (const call of calls) counts[call.change]++;
  const answer =
    sideA.content !== undefined && sideB.content !== undefined
      ? { same: sideA.content === sideB.content, a: sideA.content, b: sideB.content }
      : undefined;
  const allSame = counts.same === calls.length;
  const identical = allSame && (answer?.same ?? true) && sameModelCalls(sideA, sideB);
  return {
    match,
    calls,
    counts,
    identical,
    pass: passes(match, counts, answer),
    firstDivergence: identical ? undefined : firstDivergence(sideA, sideB, calls, answer),
    deltas: deltasOf(sideA, sideB),
    ...(answer ? { answer } : {}),
  };
}

const asSide = (side: RunDiffSide | readonly AgentStep[] | readonly LeanAgentStep[]): RunDiffSide => {
  if (Array.isArray(side)) return { toolCallLog: side as readonly AgentStep[] };
  if (!side || typeof side !== "object" || !Array.isArray((side as RunDiffSide).toolCallLog)) {
    throw new TypeError("diffRuns: each side is a tool-call log (an array) or an object with a toolCallLog array");
  }
  return side as RunDiffSide;
};

function callOf(step: AgentStep | LeanAgentStep, index: number): Call {
  const lean = "stepId" in step && typeof step.stepId === "string" && "digest" in step;
  const input = jsonRoundTrip(step.toolInput);
  const inputDigest = input === undefined ? null : digestOfRecorded(input).digest;
  const outputDigest = lean ? (step as LeanAgentStep).digest : digestOf((step as AgentStep).toolOutput).digest;
  return {
    index,
    iteration: step.iteration,
    toolName: step.toolName,
    inputDigest,
    ...(lean ? { status: (step as LeanAgentStep).status, stepId: (step as LeanAgentStep).stepId } : {}),
    outputDigest,
    key: `${step.toolName}\u0000${inputDigest ?? "-"}`,
    input,
  };
}

const publicSide = (call: Call): DiffCallSide => {
  const { key: _key, input: _input, ...side } = call;
  return side;
};

/** How the results of two calls with one key compare. */
function resultChange(a: Call, b: Call): CallChange {
  if (a.status !== undefined && b.status !== undefined && a.status !== b.status) return "status-changed";
  if (a.outputDigest !== b.outputDigest) return "output-changed";
  return "same";
}

function align(callsA: readonly Call[], callsB: readonly Call[], similarity: number): DiffCall[] {
  // 1. The calls both made in the same order: the longest common subsequence over the keys.
  const pairs = lcs(callsA, callsB);
  const pairOfB = new Map<
    number,
    { a: Call; change: CallChange; patch?: readonly JsonPatchOperation[]; moved?: true }
  >();
  const matchedA = new Set<number>();
  for (const [i, j] of pairs) {
    pairOfB.set(j, { a: callsA[i] as Call, change: resultChange(callsA[i] as Call, callsB[j] as Call) });
    matchedA.add(i);
  }
  // 2. The same call made elsewhere: reordered, paired in order of appearance.
  const freeA = new Map<string, number[]>();
  for (const call of callsA) {
    if (matchedA.has(call.index)) continue;
    const list = freeA.get(call.key);
    if (list) list.push(call.index);
    else freeA.set(call.key, [call.index]);
  }
  for (const call of callsB) {
    if (pairOfB.has(call.index)) continue;
    const i = freeA.get(call.key)?.shift();
    if (i === undefined) continue;
    const before = callsA[i] as Call;
    const change = resultChange(before, call);
    pairOfB.set(
      call.index,
      change === "same" ? { a: before, change: "reordered" } : { a: before, change, moved: true },
    );
    matchedA.add(i);
  }
  // 3. One tool's call whose input changed: the most alike pairs first, the nearest on a tie.
  const leftA = callsA.filter((c) => !matchedA.has(c.index));
  const leftB = callsB.filter((c) => !pairOfB.has(c.index));
  const candidates: { a: Call; b: Call; score: number; distance: number }[] = [];
  for (const ca of leftA) {
    for (const cb of leftB) {
      if (ca.toolName !== cb.toolName) continue;
      const score = likeness(ca.input, cb.input);
      if (score >= similarity && (score > 0 || similarity === 0)) {
        candidates.push({ a: ca, b: cb, score, distance: Math.abs(ca.index - cb.index) });
      }
    }
  }
  candidates.sort(
    (x, y) => y.score - x.score || x.distance - y.distance || x.b.index - y.b.index || x.a.index - y.a.index,
  );
  for (const { a, b } of candidates) {
    if (matchedA.has(a.index) || pairOfB.has(b.index)) continue;
    pairOfB.set(b.index, { a, change: "input-changed", patch: jsonPatch(a.input, b.input) });
    matchedA.add(a.index);
  }
  // 4. In b's order; a call only a made goes after the b call its predecessor in a was paired with.
  const bIndexOfA = new Map<number, number>();
  for (const [j, pair] of pairOfB) bIndexOfA.set(pair.a.index, j);
  const removedAfter = new Map<number, Call[]>();
  let anchor = -1;
  for (const call of callsA) {
    const j = bIndexOfA.get(call.index);
    if (j !== undefined) {
      anchor = Math.max(anchor, j);
      continue;
    }
    const list = removedAfter.get(anchor);
    if (list) list.push(call);
    else removedAfter.set(anchor, [call]);
  }
  const out: DiffCall[] = [];
  const pushRemoved = (j: number) => {
    for (const call of removedAfter.get(j) ?? []) out.push({ change: "removed", a: publicSide(call) });
  };
  pushRemoved(-1);
  for (const call of callsB) {
    const pair = pairOfB.get(call.index);
    if (!pair) out.push({ change: "added", b: publicSide(call) });
    else {
      out.push({
        change: pair.change,
        a: publicSide(pair.a),
        b: publicSide(call),
        ...(pair.patch ? { patch: pair.patch } : {}),
        ...(pair.moved ? { moved: true as const } : {}),
      });
    }
    pushRemoved(call.index);
  }
  return out;
}

/** Index pairs of a longest common subsequence of the two calls' keys (Hunt–Szymanski would do; n is small). */
function lcs(a: readonly Call[], b: readonly Call[]): [number, number][] {
  // Trim the common head and tail first: a replay that changed little costs O(n).
  let head = 0;
  while (head < a.length && head < b.length && (a[head] as Call).key === (b[head] as Call).key) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    (a[a.length - 1 - tail] as Call).key === (b[b.length - 1 - tail] as Call).key
  ) {
    tail++;
  }
  const pairs: [number, number][] = [];
  for (let k = 0; k < head; k++) pairs.push([k, k]);
  const n = a.length - head - tail;
  const m = b.length - head - tail;
  if (n > 0 && m > 0) {
    const width = m + 1;
    const table = new Uint32Array((n + 1) * width);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        table[i * width + j] =
          (a[head + i] as Call).key === (b[head + j] as Call).key
            ? (table[(i + 1) * width + j + 1] as number) + 1
            : Math.max(table[(i + 1) * width + j] as number, table[i * width + j + 1] as number);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n && j < m) {
      if ((a[head + i] as Call).key === (b[head + j] as Call).key) {
        pairs.push([head + i, head + j]);
        i++;
        j++;
      } else if ((table[(i + 1) * width + j] as number) >= (table[i * width + j + 1] as number)) i++;
      else j++;
    }
  }
  for (let k = tail; k > 0; k--) pairs.push([a.length - k, b.length - k]);
  return pairs;
}

/** The leaves of a JSON value by path, in canonical text. */
function leavesOf(value: unknown, path = "", out = new Map<string, string>()): Map<string, string> {
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
    if (entries.length === 0) out.set(path, Array.isArray(value) ? "[]" : "{}");
    for (const [k, v] of entries) leavesOf(v, `${path}/${escapePointer(k)}`, out);
    return out;
  }
  out.set(path, canonicalJsonOfParsed(value));
  return out;
}

/** The share of the leaves of `a` and `b` both have with the same value (0 to 1). */
function likeness(a: unknown, b: unknown): number {
  const la = leavesOf(a);
  const lb = leavesOf(b);
  let kept = 0;
  for (const [path, text] of la) if (lb.get(path) === text) kept++;
  const size = Math.max(la.size, lb.size);
  return size === 0 ? 1 : kept / size;
}

const escapePointer = (key: string): string => key.replaceAll("~", "~0").replaceAll("/", "~1");

/**
 * A JSON Patch (RFC 6902) from `a` to `b`, both plain JSON data: objects key by key (in sorted
 * order, so the patch is canonical), arrays index by index with the tail added or removed, any
 * other change a `replace`. Applying it to `a` gives a value whose canonical JSON is `b`'s.
 *
 * @example
 * ```ts
 * jsonPatch({ q: "shoes", n: 5 }, { q: "boots", n: 5 }); // [{ op: "replace", path: "/q", value: "boots" }]
 * ```
 */
export function jsonPatch(a: unknown, b: unknown, path = ""): JsonPatchOperation[] {
  const ops: JsonPatchOperation[] = [];
  patchInto(a, b, path, ops);
  return ops;
}

function patchInto(a: unknown, b: unknown, path: string, ops: JsonPatchOperation[]): void {
  if (a === b) return;
  const bothArrays = Array.isArray(a) && Array.isArray(b);
  const bothObjects =
    a !== null &&
    b !== null &&
    typeof a === "object" &&
    typeof b === "object" &&
    !Array.isArray(a) &&
    !Array.isArray(b);
  if (bothArrays) {
    const x = a as unknown[];
    const y = b as unknown[];
    const shared = Math.min(x.length, y.length);
    for (let i = 0; i < shared; i++) patchInto(x[i], y[i], `${path}/${i}`, ops);
    for (let i = shared; i < y.length; i++) ops.push({ op: "add", path: `${path}/${i}`, value: y[i] });
    for (let i = x.length - 1; i >= shared; i--) ops.push({ op: "remove", path: `${path}/${i}` });
    return;
  }
  if (bothObjects) {
    const x = a as Record<string, unknown>;
    const y = b as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(x), ...Object.keys(y)])].sort(compareCodeUnits);
    for (const key of keys) {
      const at = `${path}/${escapePointer(key)}`;
      if (!(key in y)) ops.push({ op: "remove", path: at });
      else if (!(key in x)) ops.push({ op: "add", path: at, value: y[key] });
      else patchInto(x[key], y[key], at, ops);
    }
    return;
  }
  if (canonicalJsonOfParsed(a) === canonicalJsonOfParsed(b)) return;
  ops.push({ op: "replace", path, value: b });
}

const compareCodeUnits = (x: string, y: string): number => (x < y ? -1 : x > y ? 1 : 0);

function passes(match: DiffMatchMode, counts: Record<CallChange, number>, answer: RunDiff["answer"]): boolean {
  const resultsSame = counts["status-changed"] === 0 && counts["output-changed"] === 0 && counts["input-changed"] === 0;
  switch (match) {
    case "strict":
      return resultsSame && counts.added + counts.removed + counts.reordered === 0 && (answer?.same ?? true);
    case "unordered":
      return resultsSame && counts.added + counts.removed === 0;
    case "subset":
      return resultsSame && counts.added === 0;
    case "superset":
      return resultsSame && counts.removed === 0;
  }
}

function sameModelCalls(a: RunDiffSide, b: RunDiffSide): boolean {
  if (!a.modelCalls || !b.modelCalls) return true;
  if (a.modelCalls.length !== b.modelCalls.length) return false;
  return a.modelCalls.every((m, i) => {
    const n = b.modelCalls?.[i] as DiffModelCall;
    return m.promptDigest === n.promptDigest && m.outputDigest === n.outputDigest;
  });
}

function firstDivergence(
  a: RunDiffSide,
  b: RunDiffSide,
  calls: readonly DiffCall[],
  answer: RunDiff["answer"],
): FirstDivergence | undefined {
  const firstCall = calls.find((c) => c.change !== "same");
  const callTurn = firstCall ? (firstCall.b ?? firstCall.a)?.iteration : undefined;
  if (a.modelCalls && b.modelCalls) {
    const shared = Math.min(a.modelCalls.length, b.modelCalls.length);
    for (let turn = 0; turn < shared; turn++) {
      const ma = a.modelCalls[turn] as DiffModelCall;
      const mb = b.modelCalls[turn] as DiffModelCall;
      // A call that differs in an earlier turn than the model does (a tool's output) came first.
      if (callTurn !== undefined && callTurn < turn) break;
      if (ma.promptDigest !== mb.promptDigest) return { turn, stepId: mb.stepId, what: "prompt" };
      if (ma.outputDigest !== mb.outputDigest) {
        if (firstCall && callTurn === turn) return callDivergence(firstCall);
        return { turn, stepId: mb.stepId, what: "model-output" };
      }
    }
    if (!firstCall && a.modelCalls.length !== b.modelCalls.length) {
      const turn = shared;
      const longer = (a.modelCalls.length > shared ? a.modelCalls : b.modelCalls)[turn] as DiffModelCall;
      return { turn, stepId: longer.stepId, what: "length" };
    }
  }
  if (firstCall) return callDivergence(firstCall);
  if (answer && !answer.same) {
    const turns = b.modelCalls?.length ?? b.iterations;
    const last = b.modelCalls?.[b.modelCalls.length - 1];
    return { turn: Math.max(0, (turns ?? 1) - 1), ...(last ? { stepId: last.stepId } : {}), what: "answer" };
  }
  return undefined;
}

function callDivergence(call: DiffCall): FirstDivergence {
  const side = (call.b ?? call.a) as DiffCallSide;
  const what: FirstDivergence["what"] =
    call.change === "input-changed"
      ? "tool-input"
      : call.change === "status-changed"
        ? "tool-status"
        : call.change === "output-changed"
          ? "tool-output"
          : "tool-calls";
  return { turn: side.iteration, ...(side.stepId ? { stepId: side.stepId } : {}), what, call };
}

function deltasOf(a: RunDiffSide, b: RunDiffSide): RunDiff["deltas"] {
  const delta = (x: number | undefined, y: number | undefined): Delta | undefined =>
    x === undefined || y === undefined ? undefined : { a: x, b: y, delta: y - x };
  const out: Record<string, Delta> = {
    toolCalls: delta(a.toolCallLog.length, b.toolCallLog.length) as Delta,
  };
  const add = (name: string, d: Delta | undefined) => {
    if (d) out[name] = d;
  };
  add("modelCalls", delta(a.usage?.modelCalls, b.usage?.modelCalls));
  add("inputTokens", delta(a.usage?.inputTokens, b.usage?.inputTokens));
  add("outputTokens", delta(a.usage?.outputTokens, b.usage?.outputTokens));
  add("cost", delta(a.usage?.cost, b.usage?.cost));
  add("iterations", delta(a.iterations, b.iterations));
  return out as unknown as RunDiff["deltas"];
}

/**
 * One side of a diff from a folded run: its lean log (digests, not outputs), its model calls with
 * the digests of their prompts and responses, its answer, model calls and tokens. Give `usage`
 * to count a cost (the runtime's `usageOfRun` with a price table), which the fold alone cannot.
 *
 * @example
 * ```ts
 * const side = runDiffSideOf(await foldRun(journal, "r-1"), projectToolCallLog(state, "lean"));
 * ```
 */
export function runDiffSideOf(
  state: RunState,
  toolCallLog: readonly AgentStep[] | readonly LeanAgentStep[],
  usage?: DiffUsage,
): RunDiffSide {
  const modelCalls: DiffModelCall[] = [];
  for (const frame of Object.values(state.frames)) {
    const parsed = parseFrameId(frame.frameId);
    if (parsed?.kind !== "model" || frame.status !== "completed") continue;
    const recorded = "output" in frame ? digestOfRecorded(frame.output).digest : (frame.archived?.digest ?? null);
    modelCalls.push({
      turn: parsed.turn,
      stepId: frame.frameId,
      promptDigest: frame.inputDigest,
      outputDigest: recorded,
    });
  }
  modelCalls.sort((x, y) => x.turn - y.turn);
  const content = state.status === "completed" ? state._output?.content : undefined;
  return {
    toolCallLog,
    ...(content !== undefined ? { content } : {}),
    iterations: modelCalls.length,
    usage: usage ?? usageOf(state, modelCalls.length),
    modelCalls,
  };
}

/** Model calls and tokens from the run's one usage fold; no cost without a price table. */
function usageOf(state: RunState, modelCalls: number): DiffUsage {
  const { inputTokens, outputTokens } = tokenUsage(state);
  return { modelCalls, inputTokens, outputTokens };
}

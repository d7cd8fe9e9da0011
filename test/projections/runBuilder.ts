/**
 * Hand-built journals for the projection tests: a run described as turns of calls, written as
 * the entries the loop appends (model frame, tool frames, outcome decisions, settled calls),
 * JSON round-tripped as a JSON store gives them back.
 */
import { digestOf, sha256Hex } from "../../src/core/digest.ts";
import { DECISION_SOURCES, modelFrameId, modePinId, outcomeId, toolStepId } from "../../src/events/ids.ts";
import type { ArchivedFrameDigest, JournalEntry, NewEntry, SettledReason, ToolCall } from "../../src/events/types.ts";
import type { ToolCallLogMode } from "../../src/projections/types.ts";

export type CallPlan =
  /** The tool ran: `output` is its live value (the frame records its JSON round trip). */
  | {
      readonly kind: "ok";
      readonly name: string;
      readonly input: unknown;
      readonly output: unknown;
      /** `output` is a claim-check envelope the runtime wrote: the frame carries the mark. */
      readonly claimChecked?: true;
    }
  /** The tool threw: the frame completes failed; `failure` is what the model was fed. */
  | { readonly kind: "failed"; readonly name: string; readonly input: unknown; readonly failure: unknown }
  /** Settled without running (a refusal, search_tools…). */
  | {
      readonly kind: "settled";
      readonly name: string;
      readonly input: unknown;
      readonly status: "ok" | "error";
      readonly reason: SettledReason;
      readonly result: unknown;
    }
  /** Never ends: in flight (frame started) or awaiting approval (nothing journaled). */
  | { readonly kind: "pending"; readonly name: string; readonly input: unknown; readonly started: boolean };

export interface TurnPlan {
  readonly calls: readonly CallPlan[];
  /** The order the calls end in (a permutation of their indexes); default in order. */
  readonly endOrder?: readonly number[];
}

export interface RunPlan {
  readonly loopId: string;
  readonly runId: string;
  readonly turns: readonly TurnPlan[];
  /** Journal a pin decision after run.started. */
  readonly pin?: ToolCallLogMode;
  /** End with a final model answer and run.completed (`{ content: "done", iterations }`, as the loop writes it). */
  readonly complete?: boolean;
}

export interface BuiltRun {
  readonly entries: NewEntry[];
  /** The seq of the entry that ended each call (only calls that ended). */
  readonly ends: ReadonlyMap<string, number>;
  /** What the model was fed per ended step id, live (before the JSON round trip). */
  readonly fed: ReadonlyMap<string, { readonly output: unknown; readonly status: "ok" | "error" }>;
}

const roundTrip = <T>(v: T): T => {
  const text = JSON.stringify(v);
  return text === undefined ? (undefined as T) : JSON.parse(text);
};

/** The entries a loop appends for `plan`, in order. */
export function buildRun(plan: RunPlan): BuiltRun {
  const entries: NewEntry[] = [];
  const ends = new Map<string, number>();
  const fed = new Map<string, { output: unknown; status: "ok" | "error" }>();
  const push = (e: NewEntry) => entries.push({ type: e.type, data: roundTrip(e.data) } as NewEntry);
  push({ type: "run.started", data: { loopId: plan.loopId, input: "go", tools: ["search", "fetch"] } });
  if (plan.pin) {
    push({
      type: "decision.recorded",
      data: { decisionId: modePinId(plan.loopId), source: DECISION_SOURCES.modePin, choice: { mode: plan.pin } },
    });
  }
  const modelFrame = (turn: number, toolCalls: ToolCall[], content?: string) => {
    const frameId = modelFrameId(plan.loopId, turn);
    push({ type: "frame.started", data: { frameId, effect: "model", inputDigest: sha256Hex(`prompt ${turn}`) } });
    push({
      type: "frame.completed",
      data: { frameId, output: content === undefined ? { toolCalls } : { content, toolCalls } },
    });
  };
  plan.turns.forEach((turn, i) => {
    const toolCalls = turn.calls.map((c, j) => ({ id: `call_${i}_${j}`, name: c.name, input: c.input }));
    modelFrame(i, toolCalls);
    // Frames start in index order (dispatch); they end in `endOrder`.
    turn.calls.forEach((c, j) => {
      const frameId = toolStepId(plan.loopId, i, j);
      const runs = c.kind === "ok" || c.kind === "failed" || (c.kind === "pending" && c.started);
      if (runs)
        push({
          type: "frame.started",
          data: { frameId, effect: `tool:${c.name}`, inputDigest: digestOf(c.input).digest ?? "" },
        });
    });
    const order = turn.endOrder ?? turn.calls.map((_, j) => j);
    for (const j of order) {
      const c = turn.calls[j];
      if (!c) continue;
      const stepId = toolStepId(plan.loopId, i, j);
      if (c.kind === "ok") {
        const mark = c.claimChecked ? { claimChecked: true as const } : {};
        push({ type: "frame.completed", data: { frameId: stepId, ...mark, output: c.output } });
        fed.set(stepId, { output: c.output, status: "ok" });
      } else if (c.kind === "failed") {
        push({ type: "frame.completed", data: { frameId: stepId, failed: true } });
        push({
          type: "decision.recorded",
          data: { decisionId: outcomeId(stepId), source: DECISION_SOURCES.outcome, choice: { failed: c.failure } },
        });
        fed.set(stepId, { output: c.failure, status: "error" });
      } else if (c.kind === "settled") {
        push({ type: "call.settled", data: { stepId, status: c.status, reason: c.reason, result: c.result } });
        fed.set(stepId, { output: c.result, status: c.status });
      } else continue;
      ends.set(stepId, entries.length);
    }
  });
  if (plan.complete) {
    const turns = plan.turns.length;
    modelFrame(turns, [], "done");
    push({ type: "run.completed", data: { output: { content: "done", iterations: turns + 1 } } });
  }
  return { entries, ends, fed };
}

/** Entries as a store hands them back: seq from 1, runId, meta. */
export function withSeqs(runId: string, entries: readonly NewEntry[], from = 1): JournalEntry[] {
  return entries.map(
    (e, i) =>
      ({
        runId,
        seq: from + i,
        type: e.type,
        data: e.data,
        meta: { v: 1, at: "2026-11-01T00:00:00.000Z" },
      }) as JournalEntry,
  );
}

/**
 * A hand-built compaction: removes the completed tool frames of turns before `beforeTurn` and
 * appends a frames.archived marker with their digests, as `compact` does. Returns the hot
 * entries and the archived frames' recorded outputs (a stand-in archive).
 */
export function compactEntries(
  entries: readonly JournalEntry[],
  beforeTurn: number,
  options: { readonly models?: boolean; readonly ref?: string } = {},
): { hot: JournalEntry[]; archived: Map<string, unknown> } {
  const pattern = options.models ? /#turn:(\d+):(?:model|tool:\d+)$/ : /#turn:(\d+):tool:\d+$/;
  const completed = new Map<string, JournalEntry>();
  for (const e of entries) if (e.type === "frame.completed") completed.set(e.data.frameId, e);
  const moved = new Set<string>();
  for (const [id] of completed) {
    const m = pattern.exec(id);
    if (m && Number(m[1]) < beforeTurn) moved.add(id);
  }
  const archived = new Map<string, unknown>();
  const digests: Record<string, ArchivedFrameDigest> = {};
  const hot: JournalEntry[] = [];
  for (const e of entries) {
    if ((e.type === "frame.started" || e.type === "frame.completed") && moved.has(e.data.frameId)) {
      if (e.type === "frame.completed") {
        const failed = e.data.failed === true;
        archived.set(e.data.frameId, e.data.output);
        const d = failed ? { digest: null, bytes: 0 } : digestOf(e.data.output);
        digests[e.data.frameId] = { ...d, ...(failed ? { failed: true } : {}) };
      }
      continue;
    }
    hot.push(e);
  }
  const last = entries[entries.length - 1];
  if (moved.size > 0 && last) {
    hot.push({
      runId: last.runId,
      seq: last.seq + 1,
      type: "frames.archived",
      data: { frameIds: [...moved], archiveRef: options.ref ?? "sha256:archive", digests },
      meta: last.meta,
    });
  }
  return { hot, archived };
}

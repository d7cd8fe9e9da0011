import { type ClaimCheckEnvelope, claimCheckOf } from "../events/claimCheck.ts";
import { modelFrameId, parseFrameId } from "../events/ids.ts";
import { type RedactionRecord, redactedFields } from "../events/redaction/redact.ts";
import { keptOriginalsOf } from "../events/redaction/redactedOriginals.ts";
import type {
  AttemptError,
  CallSettledData,
  CompletedRunValue,
  ContinuesData,
  DecisionRecordedData,
  DefinitionPinData,
  JournalEntry,
  Message,
  ModelResponse,
  RunCancelledData,
  RunFailedData,
  RunInterruptedData,
} from "../events/types.ts";
import type { Projection } from "./projection.ts";

/** One durable step as the fold sees it: its effect, input digest and (once completed) its output. */
export interface FrameState {
  readonly frameId: string;
  readonly effect: string;
  readonly inputDigest: string;
  /** started: outcome unknown (crash or abort mid-effect); completed: output recorded; failed: no output. */
  status: "started" | "completed" | "failed";
  /** The recorded output (JSON as written), for a completed frame still in the hot journal. */
  output?: unknown;
  /**
   * The claim-check envelope `output` is, when the runtime marked it so (`claimCheckOf`): only
   * then is the output resolved through the blob store. Unset for any other output, including
   * one that merely looks like an envelope (plain data).
   */
  claimCheck?: ClaimCheckEnvelope;
  /** `digestOf(output)` as the frame recorded it (tool frames written by Loom after 0.1.0). */
  recorded?: { readonly digest: string | null; readonly bytes: number };
  /** What redaction replaced in the output (`withRedaction`): `recorded` is then the original's digest. */
  redacted?: readonly RedactionRecord[];
  /** Set when compaction moved the frame: its output lives in the archive under `ref`. */
  archived?: { readonly ref: string; readonly digest: string | null; readonly bytes: number };
  /** When its last start was journaled (`meta.at`), for the run's timeline. */
  startedAt?: string;
  /** When its completion was journaled (`meta.at`). */
  endedAt?: string;
  /**
   * Times it started again while its last start had no outcome and no failed attempt awaited a
   * retry: the run that started it was cut off, and the tool ran again.
   */
  reruns?: number;
}

/** A step's failed attempts as the fold sees them (`attempt.failed`). */
export interface AttemptState {
  /** The last failed attempt's number (1-based, over the whole journal). */
  attempt: number;
  /** Attempts before this count do not count against the policy: the run was interrupted for them (`model-error`) and resumed. */
  spent: number;
  error: AttemptError;
  /** When the next attempt is due (ms since the epoch), or null when none was to follow. */
  retryAt: number | null;
  /** The last failed attempt is the frame's latest event: no next attempt has started yet. */
  waiting: boolean;
}

/** Where a run is: `new` (no entries) → `running` → `interrupted` / `completed` / `failed` / `cancelled`. */
export type RunStatus = "new" | "running" | "interrupted" | "completed" | "failed" | "cancelled";

/** When a call's approval was first asked for (see `RunState.approvalRequests`). */
export interface ApprovalWaitState {
  /** The time (ms since the epoch) of the first `run.interrupted` (`approval-pending`) that listed the call. */
  readonly requestedAt: number;
  /** When it expires (ms since the epoch), if an interruption journaled it (the tool's `approvalTimeoutMs`). */
  readonly expiresAt?: number;
}

/** A run's folded state: what a resume reads, and what every other projection starts from. */
export interface RunState {
  runId: string | undefined;
  status: RunStatus;
  loopId: string | undefined;
  /** The run's input as journaled: with `continues`, only what it adds to that history. */
  input: string | readonly Message[] | undefined;
  /** The conversation the input goes on from (a session's previous message), when `run.started` names one. */
  continues: ContinuesData | undefined;
  tools: readonly string[];
  /** The loop's definition as `run.started` recorded it (absent in runs recorded before 0.3). */
  definition: DefinitionPinData | undefined;
  /** Frames by id, model and tool alike. */
  frames: Record<string, FrameState>;
  decisions: Record<string, DecisionRecordedData>;
  /** Calls settled without running, by step id. */
  settled: Record<string, CallSettledData>;
  /** Failed attempts by frame id (model frames and tool steps that failed at least once). */
  attempts: Record<string, AttemptState>;
  /**
   * Model calls recorded: one past the highest turn with a completed model frame (archived ones
   * included). The responses themselves are the model frames' outputs: see {@link responseAt}.
   */
  turns: number;
  /**
   * The last interruption, while the run is interrupted; for a `model-error`, `cause` is the
   * model's error (also for entries written before `cause` was journaled, from their detail).
   */
  interruption: RunInterruptedData | undefined;
  error: RunFailedData["error"] | undefined;
  /** Why the run was cancelled, once `run.cancelled` ended it. */
  cancelled: RunCancelledData | undefined;
  /**
   * Calls that waited for an approval, by step id: when it was first asked for. The time is the
   * interruption's `meta.at`: wall clock that decides only when an approval expires (a decision
   * journaled once, as the decline).
   */
  approvalRequests: Record<string, ApprovalWaitState>;
  /**
   * What `run.completed` recorded of a completed run's value: `{ content, iterations }` (the
   * tool-call log is rebuilt from the frames: `completedOutput`, `rebuildToolCallLog`).
   */
  _output: CompletedRunValue | undefined;
  /** Seq of the last entry folded (the version to append after). */
  version: number;
  /** When `run.started` was journaled (`meta.at`). */
  startedAt?: string;
  /** The type of the last entry folded: what the run did last, for the faces that show it. */
  lastType?: JournalEntry["type"];
  /** When the last entry folded was journaled (`meta.at`). */
  lastAt?: string;
  /** When each call settled without running was settled (`meta.at`), by step id. */
  settledAt: Record<string, string>;
  /**
   * The first entry whose payload was redacted (`withRedaction`), if any. Such a run can be resumed
   * only through a journal that keeps its originals, and only while their keys (`keys`) are kept:
   * `unkept` is the first redacted entry that keeps no original (then it cannot be resumed at all).
   */
  redacted?: { readonly seq: number; readonly type: string; unkept?: number; keys?: string[] };
  /**
   * Set on a resume's compact state (a compact snapshot: `snapshots: { compact: true }`): the frames
   * of model turns below `belowTurn` and of their tool steps are left out (read them from the
   * journal). Unset on every state a full read gives.
   */
  compacted?: { readonly belowTurn: number };
}

/**
 * Folds a run's journal into its state. `evolve` updates the state it is given in place: the
 * fold creates that state (`initial()`) and nobody else holds it, and copy-on-write of the frame
 * table on every entry would make folding n entries O(n²).
 *
 * @example
 * const state = foldEntries(entries); // state.status, state.frames, state._output …
 */
export const runStateProjection: Projection<RunState> = {
  initial: () => ({
    runId: undefined,
    status: "new",
    loopId: undefined,
    input: undefined,
    continues: undefined,
    tools: [],
    definition: undefined,
    // No prototype: ids come from the journal and from users (`loom show constructor`).
    frames: Object.create(null),
    decisions: Object.create(null),
    settled: Object.create(null),
    attempts: Object.create(null),
    turns: 0,
    interruption: undefined,
    error: undefined,
    cancelled: undefined,
    approvalRequests: Object.create(null),
    _output: undefined,
    version: 0,
    startedAt: undefined,
    lastType: undefined,
    lastAt: undefined,
    settledAt: Object.create(null),
  }),
  evolve(state, entry) {
    state.runId = entry.runId;
    state.version = entry.seq;
    state.lastType = entry.type;
    state.lastAt = entry.meta.at;
    if ((entry.data as { redacted?: unknown }).redacted !== undefined) noteRedacted(state, entry);
    switch (entry.type) {
      case "run.started":
        state.status = "running";
        state.loopId = entry.data.loopId;
        state.input = entry.data.input;
        state.continues = entry.data.continues;
        state.tools = entry.data.tools;
        state.definition = entry.data.definition;
        state.startedAt = entry.meta.at;
        break;
      case "decision.recorded":
        state.decisions[entry.data.decisionId] = entry.data;
        break;
      case "frame.started": {
        if (state.status === "interrupted") state.status = "running";
        state.interruption = undefined;
        const { frameId } = entry.data;
        const attempts = state.attempts[frameId];
        const known = state.frames[frameId];
        const reruns = (known?.reruns ?? 0) + (known?.status === "started" && attempts?.waiting !== true ? 1 : 0);
        const frame: FrameState = {
          frameId,
          effect: entry.data.effect,
          inputDigest: entry.data.inputDigest,
          status: "started",
          startedAt: entry.meta.at,
        };
        if (reruns > 0) frame.reruns = reruns;
        state.frames[frameId] = frame;
        if (attempts) attempts.waiting = false;
        break;
      }
      case "frame.completed": {
        const frame = state.frames[entry.data.frameId];
        if (!frame) break; // the validator refuses a completion without a start; nothing to fold here
        frame.endedAt = entry.meta.at;
        if (entry.data.failed) frame.status = "failed";
        else {
          frame.status = "completed";
          frame.output = entry.data.output;
          const claimCheck = claimCheckOf(entry.data);
          if (claimCheck) frame.claimCheck = claimCheck;
          const { digest, bytes } = entry.data;
          if (digest !== undefined) frame.recorded = { digest, bytes: bytes ?? 0 };
          const redacted = redactedFields(entry.data);
          if (redacted.length > 0) frame.redacted = redacted;
          countTurn(state, frame.frameId);
        }
        break;
      }
      case "call.settled":
        state.settled[entry.data.stepId] = entry.data;
        state.settledAt[entry.data.stepId] = entry.meta.at;
        break;
      case "frames.archived":
        // The frames' own entries were removed from the hot journal; the marker stands for them.
        for (const frameId of entry.data.frameIds) {
          const d = entry.data.digests[frameId];
          const known = state.frames[frameId];
          state.frames[frameId] = {
            frameId,
            effect: d?.effect ?? known?.effect ?? "",
            inputDigest: d?.inputDigest ?? known?.inputDigest ?? "",
            status: d?.failed || known?.status === "failed" ? "failed" : "completed",
            archived: { ref: entry.data.archiveRef, digest: d?.digest ?? null, bytes: d?.bytes ?? 0 },
            ...(d?.original ? { recorded: d.original } : {}),
          };
          if (!d?.failed) countTurn(state, frameId);
        }
        // Redacted outputs moved to the archive: the run is as redacted as their entries made it.
        if (Object.values(entry.data.digests).some((d) => d.original !== undefined)) noteArchivedRedacted(state, entry);
        break;
      case "run.completed":
        state.status = "completed";
        state._output = entry.data.output;
        break;
      case "run.interrupted":
        state.status = "interrupted";
        state.interruption = withCause(entry.data);
        // Out of attempts: a resume tries again with the policy's whole budget.
        if (entry.data.reason === "model-error") for (const a of Object.values(state.attempts)) a.spent = a.attempt;
        if (entry.data.reason === "approval-pending") noteApprovalRequests(state, entry.data.detail, entry.meta.at);
        break;
      case "run.cancelled":
        state.status = "cancelled";
        state.cancelled = entry.data;
        break;
      case "attempt.failed": {
        const { frameId, attempt, error, retryAt } = entry.data;
        const spent = state.attempts[frameId]?.spent ?? 0;
        state.attempts[frameId] = { attempt, spent, error, retryAt, waiting: true };
        break;
      }
      case "run.failed":
        state.status = "failed";
        state.error = entry.data.error;
        break;
      default: {
        const never: never = entry;
        throw new Error(`unhandled entry ${JSON.stringify(never)}`);
      }
    }
    return state;
  },
};

/**
 * A model error's cause, also for entries written before `cause` was journaled: those kept the
 * error's name and message in `detail`.
 */
function withCause(data: RunInterruptedData): RunInterruptedData {
  if (data.cause !== undefined || data.reason !== "model-error") return data;
  const { name, message } = (data.detail ?? {}) as { name?: unknown; message?: unknown };
  if (typeof name !== "string" || typeof message !== "string") return data;
  return { ...data, cause: { name, message } };
}

/**
 * Notes when each call listed by an `approval-pending` interruption was first asked for, and its
 * expiry when the interruption journaled one (`detail.expiresAt`: step id → ISO time).
 */
function noteApprovalRequests(state: RunState, detail: unknown, at: string): void {
  const { stepIds, expiresAt } = (detail ?? {}) as { stepIds?: unknown; expiresAt?: unknown };
  if (!Array.isArray(stepIds)) return;
  const expiries = typeof expiresAt === "object" && expiresAt !== null ? (expiresAt as Record<string, unknown>) : {};
  const requestedAt = Date.parse(at);
  for (const stepId of stepIds) {
    if (typeof stepId !== "string") continue;
    const known = state.approvalRequests[stepId];
    const expiry = Object.hasOwn(expiries, stepId) ? Date.parse(String(expiries[stepId])) : Number.NaN;
    if (known !== undefined && (known.expiresAt !== undefined || Number.isNaN(expiry))) continue;
    state.approvalRequests[stepId] = {
      requestedAt: known?.requestedAt ?? requestedAt,
      ...(Number.isNaN(expiry) ? {} : { expiresAt: expiry }),
    };
  }
}

function countTurn(state: RunState, frameId: string): void {
  if (!frameId.endsWith(":model")) return; // a tool frame (half of them): not parsed
  const parsed = parseFrameId(frameId);
  if (parsed?.kind === "model" && parsed.turn >= state.turns) state.turns = parsed.turn + 1;
}

/**
 * The model's response at `turn` (its model frame's recorded output), or undefined while the
 * frame is not completed, or archived and not hydrated.
 *
 * @example
 * responseAt(state, 0)?.toolCalls; // the calls of the first model call
 */
export function responseAt(state: RunState, turn: number): ModelResponse | undefined {
  if (state.loopId === undefined) return undefined;
  const frame = state.frames[modelFrameId(state.loopId, turn)];
  return frame?.status === "completed" ? (frame.output as ModelResponse | undefined) : undefined;
}

/** Folds entries (validated, in seq order) into a fresh RunState. */
export function foldEntries(entries: Iterable<JournalEntry>): RunState {
  return fold(runStateProjection, entries);
}

/** Runs a projection over entries. */
export function fold<S>(projection: Projection<S>, entries: Iterable<JournalEntry>): S {
  let state = projection.initial();
  for (const entry of entries) state = projection.evolve(state, entry);
  return state;
}

/**
 * Notes a compaction marker that moved redacted outputs: what their entries kept is in the archive,
 * so the run's own key stands for it (a resume reads the marker restored when that key opens them).
 */
function noteArchivedRedacted(state: RunState, entry: JournalEntry): void {
  const r = (state.redacted ??= { seq: entry.seq, type: entry.type });
  if (!(r.keys ??= []).includes(entry.runId)) r.keys.push(entry.runId);
}

/** Notes a redacted entry: the first one, the first that keeps no original, the keys that seal the others. */
function noteRedacted(state: RunState, entry: JournalEntry): void {
  const r = (state.redacted ??= { seq: entry.seq, type: entry.type });
  const kept = keptOriginalsOf(entry.data);
  if (kept === undefined) r.unkept ??= entry.seq;
  else if (!(r.keys ??= []).includes(kept.key)) r.keys.push(kept.key);
}

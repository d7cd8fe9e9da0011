import type { ModelResponse } from "../index.ts";
import {
  type AttemptError,
  type ErrorCause,
  type InterruptReason,
  parseFrameId,
  type RunStatus,
  type SettledReason,
} from "../journal.ts";
import type { WaitChoice } from "../policies/wait.ts";

/**
 * The viewer's projection of a run: its timeline turn by turn (model call, tool calls with
 * status, bytes and duration, failed attempts, approvals) and the statechart state it was in.
 * `evolveView` (src/read/evolveView.ts) writes to the state it is given, so the same code folds in place (the run page) and
 * inside immer's `produce` (time travel, one state per seq). Its shape is made for structural
 * sharing: turns sit in chunks of {@link CHUNK}, so an entry copies its call, its turn, one chunk
 * and the short chunk list, never a table as long as the run.
 */

/** Turns per chunk. */
export const CHUNK = 32;

/** One tool call of a turn, as far as the journal tells at this point. */
export interface CallView {
  readonly stepId: string;
  readonly toolName: string;
  readonly input: unknown;
  /** asked: in the model's response, not started; running: started, not ended (in flight, or outcome unknown). */
  status: "asked" | "running" | "awaiting-approval" | "ok" | "error";
  startedAt?: string;
  endedAt?: string;
  bytes?: number;
  digest?: string | null;
  /** How the call ended without running (a refusal, a declined approval, a built-in). */
  settled?: SettledReason;
  /** Failed attempts (`attempt.failed`), the last one's error. */
  failures: number;
  lastError?: AttemptError;
  /** When the next attempt is due (ms since the epoch), while the call waits for it after a failed attempt. */
  retryAt?: number | null;
  /**
   * Times it started again with no outcome recorded for its run before (cut off by a crash, a kill
   * or a stop, then run again on resume): the tool ran more than once.
   */
  reruns?: number;
  /** The answer to its approval: approved or declined, by whom, why (as recorded). */
  approval?: { readonly approved: boolean; readonly by?: string; readonly reason?: string };
  /** Moved to the archive by compaction. */
  archived?: boolean;
  /** What the call waits for (its `<stepId>:wait`: a time or an event), once it began waiting. */
  wait?: WaitChoice;
}

/** One model call and the tool calls it asked for. */
export interface TurnView {
  readonly turn: number;
  readonly stepId: string;
  model: {
    status: "started" | "completed" | "failed";
    startedAt?: string;
    endedAt?: string;
    failures: number;
    lastError?: AttemptError;
    /** When the next attempt is due (ms since the epoch), while the step waits for it. */
    retryAt?: number | null;
    content?: string;
    usage?: ModelResponse["usage"];
    finishReason?: string;
    archived?: boolean;
  };
  calls: CallView[];
}

/** A run as the viewer shows it at one point of its journal. */
export interface RunView {
  runId: string | undefined;
  loopId: string | undefined;
  /** The seq of the last entry folded (0: none). */
  seq: number;
  /** The type of that entry. */
  lastType: string | undefined;
  status: RunStatus;
  /** The agentLoop statechart state the run was in (`running.callingModel`…): see {@link chartStateOf}. */
  chart: string;
  startedAt: string | undefined;
  lastAt: string | undefined;
  /** Turns in chunks of {@link CHUNK}: `chunks[t / CHUNK][t % CHUNK]` is turn t. */
  chunks: TurnView[][];
  turnCount: number;
  tokens: { input: number; output: number; reported: boolean };
  interruption: { reason: InterruptReason; detail: unknown; cause?: ErrorCause } | undefined;
  error: { name: string; message: string } | undefined;
  /** Why a cancelled run was cancelled (`cancelRun`). */
  cancelled: { reason: string } | undefined;
  answer: string | undefined;
  /** Step ids the last `approval-pending` interruption named, while it stands. */
  pending: string[];
  /** The log's recorded shape (the mode pin), when one was journaled. */
  mode: "full" | "lean" | undefined;
}

/** The turn at index `t`, or undefined. */
export const turnAt = (view: RunView, t: number): TurnView | undefined =>
  view.chunks[Math.floor(t / CHUNK)]?.[t % CHUNK];

/** Every turn, in order. */
export function* turnsOf(view: RunView): Generator<TurnView> {
  for (const chunk of view.chunks) yield* chunk;
}

/** A fresh view: no entries folded. */
export function initialView(): RunView {
  return {
    runId: undefined,
    loopId: undefined,
    seq: 0,
    lastType: undefined,
    status: "new",
    chart: "starting",
    startedAt: undefined,
    lastAt: undefined,
    chunks: [],
    turnCount: 0,
    tokens: { input: 0, output: 0, reported: false },
    interruption: undefined,
    error: undefined,
    cancelled: undefined,
    answer: undefined,
    pending: [],
    mode: undefined,
  };
}

/**
 * The agentLoop statechart state a run with this view is in: `starting`, `running.deciding`,
 * `running.callingModel`, `running.backingOff`, `running.dispatching`, `finishing`, or a final
 * state (`completed`, `interrupted`, `failed`, `cancelled`). Read from the journal, the way a resume would
 * find it.
 */
export function chartStateOf(view: RunView): string {
  if (view.status === "new") return "starting";
  if (view.status !== "running") return view.status;
  const turn = turnAt(view, view.turnCount - 1);
  if (!turn) return "running.deciding";
  if (turn.model.status !== "completed") {
    return turn.model.retryAt !== undefined && turn.model.retryAt !== null
      ? "running.backingOff"
      : "running.callingModel";
  }
  if (turn.calls.length === 0) return "finishing";
  return turn.calls.some((c) => c.status === "asked" || c.status === "running")
    ? "running.dispatching"
    : "running.deciding";
}

/** The tool call `stepId` (`<loop>#turn:<i>:tool:<j>`), once its model call asked for it. */
export function callAt(view: RunView, stepId: string): CallView | undefined {
  const id = parseFrameId(stepId);
  if (id?.kind !== "tool") return undefined;
  return turnAt(view, id.turn)?.calls[id.index];
}

import { redactedResumeRefusal, refusalText } from "../events/redaction/redactedResume.ts";
import { type Journal, type RunActivity, runActivity, type ToolCallLogMode } from "../index.ts";
import {
  describeCause,
  type ErrorCause,
  foldEntries,
  type InterruptReason,
  type JournalEntry,
  parseFrameId,
  type RunState,
  recordedModePin,
  scheduledRunOf,
} from "../journal.ts";
import type { BudgetBreach } from "../policies/budget.ts";
import { waitDueAt } from "../policies/wait.ts";
import { entryBytes } from "../projections/runSnapshot.ts";
import { tokenUsage } from "../projections/usage.ts";
import { openWaits, runDueAt } from "../projections/waits.ts";

/**
 * What the CLI (`loom runs`, `loom show`, `loom log`) and the viewer's pages show of a run, read
 * by these functions so both say the same thing.
 */

/** What `loom runs`, `loom show` and `loom view` show of a run: `runInfo` with its activity read from the store. */
export async function runInfoOf(journal: Journal, runId: string, entries: readonly JournalEntry[]): Promise<RunInfo> {
  const state = foldEntries(entries);
  const { activity } = await runActivity(journal, runId, entries);
  return runInfoOfState(runId, state, factsOf(entries), activity, await resumeRefusalOf(journal, state));
}

/**
 * Why a resume of the run would be refused because of redaction (no original kept, or the key
 * that opens them forgotten), in words; undefined when it would not be, or the run has ended.
 * What {@link runInfoOfState} is given by readers that hold the journal.
 */
export async function resumeRefusalOf(journal: Journal, state: RunState): Promise<string | undefined> {
  if (state.redacted === undefined || ENDED.has(state.status)) return undefined;
  return redactedResumeRefusal(journal, state);
}

const ENDED: ReadonlySet<RunState["status"]> = new Set(["completed", "failed", "cancelled"]);

/** The bytes an entry takes in the journal: its type, data and meta as stored (UTF-8 JSON text). */
export { entryBytes } from "../projections/runSnapshot.ts";

export interface RunInfo {
  readonly runId: string;
  readonly loopId: string | undefined;
  /** The journal's status (`running` for every run whose journal does not end). */
  readonly status: RunState["status"];
  /** What the run is doing: `running`, `stalled`, `not-started`, `answered`… (`runActivity`). */
  readonly activity: RunActivity;
  /** Model calls recorded (completed model frames). */
  readonly iterations: number;
  /** The log's recorded shape: the mode pin, or "full" when none was journaled. */
  readonly mode: ToolCallLogMode;
  readonly entries: number;
  /** The last seq (more than `entries` after a compaction). */
  readonly version: number;
  readonly bytes: number;
  readonly startedAt: string | undefined;
  readonly updatedAt: string | undefined;
  /** Tokens the run's model calls used (their recorded usage, summed). */
  readonly tokens: { readonly input: number; readonly output: number };
  /** Why an interrupted run stopped, and the model's error for a `model-error`. */
  readonly interrupted?: {
    readonly reason: InterruptReason;
    readonly cause?: ErrorCause;
    /** For a `budget` stop: the limit reached, the usage and the limits (`BudgetBreach`). */
    readonly budget?: BudgetBreach;
  };
  /** Why a cancelled run was cancelled (`cancelRun`). */
  readonly cancelled?: { readonly reason: string };
  /**
   * For a run interrupted `waiting` (docs/waits.md): when it is next due (ISO 8601: a sleep's wake
   * or an event wait's timeout), absent when only an event can end its waits; `due` once a wait
   * ended while it was stopped (an event delivered): it goes on when resumed. `timesOut` when the
   * wait due at `until` is an event wait timing out then, not a sleep waking.
   */
  readonly wait?: { readonly until?: string; readonly due?: true; readonly timesOut?: true };
  /** The schedule and tick (ISO) that started the run, read from its id `<scheduleId>@<tick>`. */
  readonly schedule?: { readonly scheduleId: string; readonly tick: string };
  /**
   * Why a resume of the run would be refused, when it would be: its journal was redacted and keeps
   * no original the resume can open (`RedactedHistoryError`). Readers then advise no resume.
   */
  readonly unresumable?: string;
}

/**
 * What `loom runs` shows of a run, from its entries and its activity (`runActivity`: see
 * `runInfoOf`, which reads it); without one, the journal's status stands for it.
 */
export function runInfo(runId: string, entries: readonly JournalEntry[], activity?: RunActivity): RunInfo {
  return runInfoOfState(runId, foldEntries(entries), factsOf(entries), activity);
}

const factsOf = (entries: readonly JournalEntry[]): EntryFacts => ({
  entries: entries.length,
  bytes: entries.reduce((sum, e) => sum + entryBytes(e), 0),
  startedAt: entries[0]?.meta.at,
  updatedAt: entries.at(-1)?.meta.at,
});

/** What {@link runInfo} reads of the entries besides their fold. */
export interface EntryFacts {
  readonly entries: number;
  readonly bytes: number;
  readonly startedAt: string | undefined;
  readonly updatedAt: string | undefined;
}

/**
 * {@link runInfo} of a run already folded: for a reader that keeps the state as entries come
 * (`KeptRun`). `unresumable` is what {@link resumeRefusalOf} said of it; without it, only what the
 * entries tell (a redacted entry that keeps no original) is known.
 */
export function runInfoOfState(
  runId: string,
  state: RunState,
  facts: EntryFacts,
  activity?: RunActivity,
  unresumable: string | undefined = unkeptRefusal(state),
): RunInfo {
  return {
    runId,
    loopId: state.loopId,
    status: state.status,
    activity: activity ?? state.status,
    iterations: modelCalls(state),
    mode: recordedModePin(state) ?? "full",
    entries: facts.entries,
    version: state.version,
    bytes: facts.bytes,
    startedAt: facts.startedAt,
    updatedAt: facts.updatedAt,
    tokens: tokensOf(state),
    ...(state.status === "interrupted" && state.interruption
      ? {
          interrupted: {
            reason: state.interruption.reason,
            cause: state.interruption.cause,
            ...(state.interruption.reason === "budget" ? { budget: state.interruption.detail as BudgetBreach } : {}),
          },
        }
      : {}),
    ...(state.status === "cancelled" && state.cancelled ? { cancelled: { reason: state.cancelled.reason } } : {}),
    ...(state.status === "interrupted" && state.interruption?.reason === "waiting" ? { wait: waitOf(state) } : {}),
    ...scheduleOf(runId),
    ...(unresumable === undefined ? {} : { unresumable }),
  };
}

/** The refusal the entries alone tell: a redacted entry that keeps no original, in a run that has not ended. */
function unkeptRefusal(state: RunState): string | undefined {
  const unkept = state.redacted?.unkept;
  return unkept === undefined || ENDED.has(state.status) ? undefined : refusalText(unkept, false);
}

/** {@link RunInfo.wait} of a run interrupted `waiting`. */
function waitOf(state: RunState): NonNullable<RunInfo["wait"]> {
  const due = runDueAt(state);
  if (due === undefined) return {};
  if (due === 0) return { due: true };
  const first = openWaits(state).find(({ wait }) => waitDueAt(wait) === due);
  return { until: new Date(due).toISOString(), ...(first?.wait.kind === "event" ? { timesOut: true } : {}) };
}

/** `{ schedule }` for a run a schedule started (its id says so), else nothing. */
function scheduleOf(runId: string): { schedule?: RunInfo["schedule"] } {
  const from = scheduledRunOf(runId);
  return from === undefined ? {} : { schedule: { scheduleId: from.scheduleId, tick: from.tick.toISOString() } };
}

/**
 * Where a scheduled run came from, on one line: `schedule digest, tick 2026-03-02 08:00:00 UTC`;
 * "" for a run no schedule started.
 */
export function scheduleText(info: Pick<RunInfo, "schedule">): string {
  const s = info.schedule;
  return s === undefined ? "" : `schedule ${s.scheduleId}, tick ${s.tick.replace("T", " ").slice(0, 19)} UTC`;
}

/**
 * Why a run stopped, on one line for text output: `model-error: AI_APICallError (status 401, not
 * retryable): Unauthorized`, the reason alone without a cause, "" for a run that did not stop.
 * Control characters in the error's text are escaped (`\u001b`), so it cannot drive the terminal.
 */
export function stoppedText(info: RunInfo): string {
  const i = info.interrupted;
  const resumable = info.unresumable === undefined;
  const stopped =
    i === undefined
      ? info.cancelled === undefined
        ? ""
        : `cancelled: ${info.cancelled.reason}`
      : i.budget !== undefined
        ? `budget: ${budgetText(i.budget, resumable)}`
        : i.cause === undefined
          ? i.reason
          : `${i.reason}: ${describeCause(i.cause)}`;
  const text = resumable ? stopped : `${stopped}${stopped === "" ? "" : "; "}${info.unresumable}`;
  return text.replace(/\p{Cc}/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * A budget stop's figures on one line: the limit reached and its value, then the usage (model
 * calls, tokens in and out, cost), e.g. `inputTokens 600 of 600 reached; used 3 model calls, 600 in / 30 out tokens, cost 0`,
 * then the advice to raise the budget and resume, unless `resumable` is false (a resume would be refused).
 *
 * @example
 * budgetText({ limit: "modelCalls", used: { modelCalls: 2, inputTokens: 0, outputTokens: 0, cost: 0 }, limits: { modelCalls: 2 } });
 */
export function budgetText(breach: BudgetBreach, resumable = true): string {
  const used = breach.used ?? { modelCalls: 0, inputTokens: 0, outputTokens: 0, cost: 0 };
  const limit = breach.limit;
  const cost = Number(used.cost.toPrecision(6));
  return `${limit} ${Number(used[limit]?.toPrecision(6))} of ${breach.limits?.[limit]} reached; used ${used.modelCalls} model calls, ${used.inputTokens} in / ${used.outputTokens} out tokens, cost ${cost}${resumable ? ". Raise the budget and resume the run" : ""}`;
}

/** The run's token usage as `loom runs` shows it (archived model frames are not read back for a listing). */
function tokensOf(state: RunState): RunInfo["tokens"] {
  const usage = tokenUsage(state);
  return { input: usage.inputTokens, output: usage.outputTokens };
}

/** Completed model frames: the model calls a run made. */
export const modelCalls = (state: RunState): number =>
  Object.values(state.frames).filter((f) => f.status === "completed" && parseFrameId(f.frameId)?.kind === "model")
    .length;

import { checkRunId, runIdProblem } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import { foldEntries, type RunState } from "../../projections/runState.ts";
import type { RunWait } from "../../projections/types.ts";
import { describeApproval, endedWaits, lastTurnWaits, runDueAt, waitsIn } from "../../projections/waits.ts";
import { isAgentInterruptedError } from "../base/errors.ts";
import { activityOfFolded } from "../control/activity.ts";
import { listPendingApprovals } from "../control/approvals.ts";
import type { AgentLoop } from "./agentLoop.ts";

/** A run whose journal ends with one of these has ended: nothing of it waits any more. */
const ENDINGS: ReadonlySet<string> = new Set(["run.completed", "run.cancelled", "run.failed"]);

/**
 * The runs to look at: `runId` alone, or every run that has not ended. A wait is found from its
 * decision (`<stepId>:wait`), not from the run's interruption: a process killed after journaling
 * a wait and before its run stopped leaves the run `stalled`, its journal ending anywhere in the
 * turn (the wait, another call's step).
 */
async function unendedRuns(journal: Journal, runId: string | undefined, caller: string): Promise<string[]> {
  if (runId !== undefined) {
    checkRunId(runId, caller);
    return [runId];
  }
  return (await journal.store.listRuns())
    .filter((r) => !ENDINGS.has(r.lastType) && runIdProblem(r.runId) === undefined)
    .map((r) => r.runId);
}

/**
 * Whether a folded run waits: it stopped `waiting`, or it is stalled (nobody runs it: its process
 * died) in a turn whose calls journaled waits. A run a live process runs is left to that process.
 */
async function waitsNow(journal: Journal, runId: string, state: RunState): Promise<boolean> {
  if (state.status === "interrupted") return state.interruption?.reason === "waiting";
  if (state.status !== "running" || lastTurnWaits(state).length === 0) return false;
  return (await activityOfFolded(journal, runId, state, undefined)).activity === "stalled";
}

/**
 * Everything the journal's runs wait for (or `runId`'s): each call that sleeps or waits for an
 * event, and each pending approval (one kind of wait), with until when and how to end it. A wait
 * is listed from the moment it is journaled, also for a run whose process died before the run
 * could stop for it. Reads only.
 *
 * @example
 * for (const w of await listWaits(journal)) console.log(`${w.runId} ${w.stepId} ${w.kind} ${w.until ?? ""} → ${w.deliver}`);
 */
export async function listWaits(journal: Journal, options: { readonly runId?: string } = {}): Promise<RunWait[]> {
  const out: RunWait[] = [];
  for (const p of await listPendingApprovals(journal, options.runId === undefined ? {} : { runId: options.runId }))
    out.push(describeApproval(p.runId, p.stepId, p.toolName, p.expiresAt));
  for (const runId of await unendedRuns(journal, options.runId, "listWaits")) {
    const state = foldEntries(await readJournal(journal, runId));
    if (state.status !== "interrupted" && state.status !== "running") continue;
    out.push(...waitsIn(state, runId));
  }
  return out;
}

/** Options of `wakeDueRuns`. */
export interface WakeOptions {
  /** The loops that may be resumed, by loop id (a run of another loop is reported, not run). */
  readonly loops: Readonly<Record<string, AgentLoop>> | readonly AgentLoop[];
  /** The clock (ms since the epoch; default `Date.now`): also the resumed runs' `RunOptions.now`. */
  readonly now?: () => number;
  /** Only this run. */
  readonly runId?: string;
  /** List what is due without resuming anything. */
  readonly dryRun?: boolean;
}

/** One run `wakeDueRuns` looked at. */
export interface WokenRun {
  readonly runId: string;
  readonly loopId: string | undefined;
  /**
   * When it is next due (ISO 8601); undefined when only a delivery can end its waits, or when it
   * is due at once because one of them ended while it was stopped (`ended` says how).
   */
  readonly dueAt: string | undefined;
  /**
   * Set when one of its waits ended while it was stopped, which makes it due at once:
   * `event-delivered` (an event was delivered to it), `wait-ended` (a sleep ended by a resume that
   * stopped before going on).
   */
  readonly ended?: "event-delivered" | "wait-ended";
  /**
   * `completed`, `interrupted` (it waits again, or for something else), `failed`; `not-due`;
   * `due` (a dry run); `no-loop` (its loop was not given).
   */
  readonly outcome: "completed" | "interrupted" | "failed" | "not-due" | "due" | "no-loop";
  /** The reason it stopped again, when `interrupted`. */
  readonly reason?: string;
  /** The error, when `failed`. */
  readonly error?: string;
}

/**
 * Resumes the runs that wait and are due: a sleep whose time came, an event wait past its
 * timeout, or a wait whose event was delivered. A run that waits is one stopped `waiting`, or one
 * whose process died after journaling its waits and before it stopped (stalled in that turn,
 * once the dead process's lease has run out). On SQLite this is what a cron job or a small timer
 * calls (`loom wake` does); on PostgreSQL `startWorker` does it by itself. A run resumed before it
 * is due would only stop again, so it is not resumed.
 *
 * @example
 * setInterval(() => wakeDueRuns(journal, { loops: [reminders] }), 60_000); // an embedded scheduler
 */
export async function wakeDueRuns(journal: Journal, options: WakeOptions): Promise<WokenRun[]> {
  const loops: Record<string, AgentLoop> = Array.isArray(options.loops)
    ? Object.fromEntries((options.loops as readonly AgentLoop[]).map((l) => [l.config.id, l]))
    : (options.loops as Record<string, AgentLoop>);
  const clock = options.now ?? Date.now;
  const out: WokenRun[] = [];
  for (const runId of await unendedRuns(journal, options.runId, "wakeDueRuns")) {
    const state = foldEntries(await readJournal(journal, runId));
    if (!(await waitsNow(journal, runId, state))) continue;
    const due = runDueAt(state);
    const base = due === 0 ? endedBase(runId, state) : { runId, loopId: state.loopId, dueAt: isoOf(due) };
    if (due === undefined || clock() < due) {
      out.push({ ...base, outcome: "not-due" });
      continue;
    }
    const loop = state.loopId === undefined ? undefined : loops[state.loopId];
    if (loop === undefined || options.dryRun) {
      out.push({ ...base, outcome: loop === undefined ? "no-loop" : "due" });
      continue;
    }
    try {
      await loop.run({ runId, journal, now: clock });
      out.push({ ...base, outcome: "completed" });
    } catch (e) {
      if (isAgentInterruptedError(e)) out.push({ ...base, outcome: "interrupted", reason: e.run.reason });
      else out.push({ ...base, outcome: "failed", error: e instanceof Error ? e.message : String(e) });
    }
  }
  return out;
}

const isoOf = (ms: number | undefined): string | undefined =>
  ms === undefined ? undefined : new Date(ms).toISOString();

/** A run due at once because a wait ended while it was stopped: what ended it, no due time. */
function endedBase(runId: string, state: RunState): Pick<WokenRun, "runId" | "loopId" | "dueAt" | "ended"> {
  const delivered = endedWaits(state).some((w) => w.kind === "event");
  return { runId, loopId: state.loopId, dueAt: undefined, ended: delivered ? "event-delivered" : "wait-ended" };
}

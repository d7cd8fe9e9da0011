import { checkRunId, runIdProblem } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import { foldEntries } from "../../projections/runState.ts";
import type { RunWait } from "../../projections/types.ts";
import { isAgentInterruptedError } from "../base/errors.ts";
import { listPendingApprovals } from "../control/approvals.ts";
import { describeApproval, runDueAt, waitsIn } from "../steps/waits.ts";
import type { AgentLoop } from "./agentLoop.ts";

/**
 * The runs to look at: `runId` alone, or every run whose last entry is an interruption, or an
 * event's delivery (`frame.completed` appended to an interrupted run).
 */
async function interruptedRuns(journal: Journal, runId: string | undefined, caller: string): Promise<string[]> {
  if (runId !== undefined) {
    checkRunId(runId, caller);
    return [runId];
  }
  return (await journal.store.listRuns())
    .filter(
      (r) =>
        (r.lastType === "run.interrupted" || r.lastType === "frame.completed") && runIdProblem(r.runId) === undefined,
    )
    .map((r) => r.runId);
}

/**
 * Everything the journal's runs wait for (or `runId`'s): each call that sleeps or waits for an
 * event, and each pending approval (one kind of wait), with until when and how to end it. Reads only.
 *
 * @example
 * for (const w of await listWaits(journal)) console.log(`${w.runId} ${w.stepId} ${w.kind} ${w.until ?? ""} → ${w.deliver}`);
 */
export async function listWaits(journal: Journal, options: { readonly runId?: string } = {}): Promise<RunWait[]> {
  const out: RunWait[] = [];
  for (const p of await listPendingApprovals(journal, options.runId === undefined ? {} : { runId: options.runId }))
    out.push(describeApproval(p.runId, p.stepId, p.toolName, p.expiresAt));
  for (const runId of await interruptedRuns(journal, options.runId, "listWaits")) {
    const state = foldEntries(await readJournal(journal, runId));
    if (state.status !== "interrupted") continue;
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
  /** When it is next due (ISO 8601), or undefined when only a delivery can end its waits. */
  readonly dueAt: string | undefined;
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
 * Resumes the runs that wait (`waiting`) and are due: a sleep whose time came, an event wait past
 * its timeout, or a wait whose event was delivered. On SQLite this is what a cron job or a small
 * timer calls (`loom wake` does); on PostgreSQL `startWorker` does it by itself. A run resumed
 * before it is due would only stop again, so it is not resumed.
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
  for (const runId of await interruptedRuns(journal, options.runId, "wakeDueRuns")) {
    const state = foldEntries(await readJournal(journal, runId));
    if (state.status !== "interrupted" || state.interruption?.reason !== "waiting") continue;
    const due = runDueAt(state);
    const base = { runId, loopId: state.loopId, dueAt: due === undefined ? undefined : new Date(due).toISOString() };
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

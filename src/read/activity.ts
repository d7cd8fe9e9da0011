import type { RunActivity } from "../index.ts";
import { printable } from "./format.ts";
import { type RunInfo, stoppedText } from "./runInfo.ts";

/**
 * A run's activity in words, and what it needs to go on: what `loom runs`, `loom show` and the
 * viewer's pages say of it.
 */

/**
 * How to resume run `runId` of loop `loopId`, as a command a user can type: the CLI names
 * `loom resume` for a loop it defines, `loop.run({ runId, journal })` otherwise.
 */
export type ResumeCommand = (runId: string, loopId: string | undefined) => string;

/** The call a program that defines the loop makes to resume a run: `loop.run({ runId: "r-1", journal })`. */
export const programResume: ResumeCommand = (runId) => `loop.run({ runId: "${printable(runId)}", journal })`;

/** Activities whose run goes on only when someone resumes it. */
const NEEDS_RESUME: ReadonlySet<RunActivity> = new Set(["stalled", "not-started", "answered"]);

/** An activity in words: `not started`, `waiting for approval`… */
export const activityLabel = (activity: RunActivity): string => activity.replaceAll("-", " ");

/**
 * A run's status in words, as `loom runs`, `loom show` and the viewer's pages print it: its
 * activity's label, except for a run interrupted to wait (docs/waits.md), which says what it waits
 * for, by the wait due first: `waiting (until 2026-01-04T00:00:00.000Z)` for a sleep,
 * `waiting for event (times out 2026-01-04T00:00:00.000Z)` for an event wait that times out,
 * `waiting for event` when only a delivery can end its waits, `waiting (due now)` once an event was
 * delivered and it waits for its resume. A run waiting for a person says `waiting for approval`.
 *
 * @example
 * statusLabel(runInfo("r-1", entries)); // "waiting (until 2026-01-04T00:00:00.000Z)"
 */
export function statusLabel(info: RunInfo): string {
  const w = info.activity === "interrupted" ? info.wait : undefined;
  if (w === undefined) return activityLabel(info.activity);
  if (w.due) return "waiting (due now)";
  if (w.until === undefined) return "waiting for event";
  return w.timesOut ? `waiting for event (times out ${w.until})` : `waiting (until ${w.until})`;
}

/**
 * The status on one line (`statusLabel`), with how to go on when the run needs a resume: `running`,
 * `stalled — resume with loom resume 'r-1'`, `not started — resume with loop.run(…)`.
 */
export function activityText(info: RunInfo, resume: ResumeCommand = programResume): string {
  const label = statusLabel(info);
  if (!NEEDS_RESUME.has(info.activity)) return label;
  return `${label} — ${info.unresumable ?? resumeHint(info, resume)}`;
}

/**
 * `resume with <command>` for a run that goes on only when resumed, else "" (also for a run whose
 * resume would be refused: `RunInfo.unresumable` says why).
 */
export function resumeHint(info: RunInfo, resume: ResumeCommand = programResume): string {
  if (info.unresumable !== undefined) return "";
  return NEEDS_RESUME.has(info.activity) ? `resume with ${resume(info.runId, info.loopId)}` : "";
}

/**
 * Why a run stopped, or what it needs (the `stopped` column of `loom runs`, the viewer's): the
 * reason of an interruption or a cancel, and `resume with …` for a stalled, not started or
 * answered run.
 */
export function stoppedOrNext(info: RunInfo, resume: ResumeCommand = programResume): string {
  const hint = resumeHint(info, resume);
  if (info.activity === "answered") return `approvals answered; ${info.unresumable ?? hint}`;
  return hint || stoppedText(info);
}

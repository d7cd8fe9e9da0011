import { type Journal, type JournalEntry, type RunActivity, runActivity } from "../index.ts";
import { type RunInfo, runInfo, stoppedText } from "./db.ts";
import { printable } from "./format.ts";
import { KNOWN_LOOPS } from "./loops.ts";

/** What `loom runs`, `loom show` and `loom view` show of a run: `runInfo` with its activity read from the store. */
export async function runInfoOf(journal: Journal, runId: string, entries: readonly JournalEntry[]): Promise<RunInfo> {
  return runInfo(runId, entries, (await runActivity(journal, runId, entries)).activity);
}

/** Activities whose run goes on only when someone resumes it. */
const NEEDS_RESUME: ReadonlySet<RunActivity> = new Set(["stalled", "not-started", "answered"]);

/**
 * How to resume a run: `loom resume <runId>` for a loop this command defines (the demo's), else
 * the call the program that defines the loop makes.
 */
export function resumeCommand(runId: string, loopId: string | undefined): string {
  if (loopId !== undefined && KNOWN_LOOPS.has(loopId)) return `loom resume '${printable(runId)}'`;
  return `loop.run({ runId: "${printable(runId)}", journal })`;
}

/** An activity in words: `not started`, `waiting for approval`… */
export const activityLabel = (activity: RunActivity): string => activity.replaceAll("-", " ");

/**
 * The activity on one line, with how to go on when the run needs a resume: `running`,
 * `stalled — resume with loom resume 'r-1'`, `not started — resume with loop.run(…)`.
 */
export function activityText(info: RunInfo): string {
  const label = activityLabel(info.activity);
  return NEEDS_RESUME.has(info.activity) ? `${label} — ${resumeHint(info)}` : label;
}

/** `resume with <command>` for a run that goes on only when resumed, else "". */
export function resumeHint(info: RunInfo): string {
  return NEEDS_RESUME.has(info.activity) ? `resume with ${resumeCommand(info.runId, info.loopId)}` : "";
}

/**
 * Why a run stopped, or what it needs (the `stopped` column of `loom runs`, the viewer's): the
 * reason of an interruption or a cancel, and `resume with …` for a stalled, not started or
 * answered run.
 */
export function stoppedOrNext(info: RunInfo): string {
  const hint = resumeHint(info);
  if (info.activity === "answered") return `approvals answered; ${hint}`;
  return hint || stoppedText(info);
}

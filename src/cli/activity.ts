import type { RunActivity } from "../index.ts";
import * as read from "../read/activity.ts";
import type { RunInfo } from "../read/runInfo.ts";
import { printable } from "./format.ts";
import type { JournalSource } from "./journalSource.ts";
import { KNOWN_LOOPS } from "./loops.ts";

export { activityLabel, statusLabel } from "../read/activity.ts";
export { runInfoOf } from "../read/runInfo.ts";

/**
 * How to resume a run: `loom resume <runId>` for a loop this command defines (the demo's), else
 * the call the program that defines the loop makes.
 */
export const resumeCommand: read.ResumeCommand = (runId, loopId) =>
  loopId !== undefined && KNOWN_LOOPS.has(loopId)
    ? `loom resume '${printable(runId)}'`
    : read.programResume(runId, loopId);

/**
 * How to resume a run of the journal `source` names, for a run doing `activity` (any, when not
 * given). On SQLite, {@link resumeCommand}. On PostgreSQL, the program's `loop.run(…)` (`loom
 * resume` reads SQLite files only) and, for a stalled run (or any, when `activity` is not given),
 * that a worker takes it over by itself once the lease of the process that ran it runs out, when
 * the run was submitted to the workers (`submitRun`).
 *
 * @example
 * resumeCommandFor({ kind: "postgres" }, "stalled")("r-1", "support");
 * // 'loop.run({ runId: "r-1", journal }); a worker takes it over by itself once its lease runs out, if it was submitted to workers (submitRun)'
 */
export function resumeCommandFor(source: Pick<JournalSource, "kind">, activity?: RunActivity): read.ResumeCommand {
  if (source.kind !== "postgres") return resumeCommand;
  if (activity !== undefined && activity !== "stalled") return read.programResume;
  const worker =
    activity === "stalled"
      ? "a worker takes it over by itself once its lease runs out"
      : "a worker takes a stalled run over by itself once its lease runs out";
  return (runId, loopId) =>
    `${read.programResume(runId, loopId)}; ${worker}, if it was submitted to workers (submitRun)`;
}

/** `activityText` (src/read/activity.ts) naming `loom resume` for the loops this command defines; on PostgreSQL, see {@link resumeCommandFor}. */
export const activityText = (info: RunInfo, source: Pick<JournalSource, "kind"> = SQLITE): string =>
  read.activityText(info, resumeCommandFor(source, info.activity));

/** `resumeHint` (src/read/activity.ts) naming `loom resume` for the loops this command defines; on PostgreSQL, see {@link resumeCommandFor}. */
export const resumeHint = (info: RunInfo, source: Pick<JournalSource, "kind"> = SQLITE): string =>
  read.resumeHint(info, resumeCommandFor(source, info.activity));

/** `stoppedOrNext` (src/read/activity.ts) naming `loom resume` for the loops this command defines; on PostgreSQL, see {@link resumeCommandFor}. */
export const stoppedOrNext = (info: RunInfo, source: Pick<JournalSource, "kind"> = SQLITE): string =>
  read.stoppedOrNext(info, resumeCommandFor(source, info.activity));

const SQLITE = { kind: "sqlite" } as const;

import * as read from "../read/activity.ts";
import type { RunInfo } from "../read/runInfo.ts";
import { printable } from "./format.ts";
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

/** `activityText` (src/read/activity.ts) naming `loom resume` for the loops this command defines. */
export const activityText = (info: RunInfo): string => read.activityText(info, resumeCommand);

/** `resumeHint` (src/read/activity.ts) naming `loom resume` for the loops this command defines. */
export const resumeHint = (info: RunInfo): string => read.resumeHint(info, resumeCommand);

/** `stoppedOrNext` (src/read/activity.ts) naming `loom resume` for the loops this command defines. */
export const stoppedOrNext = (info: RunInfo): string => read.stoppedOrNext(info, resumeCommand);

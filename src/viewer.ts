/**
 * `loom-agent/viewer`: the run viewer `loom view` serves, to embed in a program of your own (give
 * it the run-control API to get its approve/deny, cancel and fork buttons, and a live source).
 */

export type { ResumeCommand } from "./read/activity.ts";
export type { PendingApproval, ViewerActions } from "./viewer/actions.ts";
export { isViewerStartError, ViewerStartError } from "./viewer/host.ts";
export { followSource, type LiveEvent, type LiveSource } from "./viewer/live.ts";
export { startViewer, type Viewer, type ViewerOptions } from "./viewer/server.ts";

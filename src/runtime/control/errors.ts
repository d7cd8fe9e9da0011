import { LoomError } from "../../core/errors.ts";

/** Why `recordApproval` (or `loop.run({ approvals })`) refused an answer. */
export type ApprovalRefusal =
  /** The run does not wait for this step's approval (not asked, or the run went on). */
  | "approvalNotPending"
  /**
   * The step id names no call of the run that was ever asked about (a typo, another run's or
   * another loop's step): in `recordApproval`, `loom approve`/`deny`, the viewer, or a key of
   * `loop.run({ approvals })` for a run that waits for approvals.
   */
  | "approvalUnknownStep"
  /** The step's approval was decided already (once, by whoever answered first). */
  | "approvalDecided"
  /** The caller approved another input than the one the call would run with. */
  | "approvalInputMismatch"
  /** The approval's time (the tool's `approvalTimeoutMs`) has passed: it is declined on resume. */
  | "approvalExpired";

/**
 * An approval was refused: the step is no call of the run, is not waiting, was decided already,
 * the caller approved another input, or the approval expired. Nothing was journaled.
 *
 * @example
 * await recordApproval(journal, runId, stepId, { approved: true }).catch((e) => {
 *   if (isApprovalRefusedError(e) && e.code === "approvalDecided") return; // someone answered first
 *   throw e;
 * });
 */
export class ApprovalRefusedError extends LoomError {
  declare readonly code: ApprovalRefusal;
  readonly runId: string;
  readonly stepId: string;
  constructor(code: ApprovalRefusal, runId: string, stepId: string, message: string) {
    super(code, message);
    this.runId = runId;
    this.stepId = stepId;
  }
}

/** True when `e` is an `ApprovalRefusedError`. */
export const isApprovalRefusedError = (e: unknown): e is ApprovalRefusedError => e instanceof ApprovalRefusedError;

/** Why an operation on a run by id (`cancelRun`, `forkRun`, `recordApproval`) was refused. */
export type RunControlRefusal =
  /** No run of that id in the journal. */
  | "runNotFound"
  /** The run has ended (completed, failed, cancelled): nothing to cancel. */
  | "runFinished"
  /** `forkRun`'s `at` names no step or seq of the source run. */
  | "forkPointNotFound"
  /** `forkRun`'s `newRunId` is a run of the journal already. */
  | "runExists";

/**
 * An operation on a run by id was refused: the run is unknown, already ended, or (fork) the
 * fork point or the new id does not fit. Nothing was journaled.
 *
 * @example
 * await cancelRun(journal, "r-1", { reason: "stuck" }).catch((e) => {
 *   if (isRunControlError(e) && e.code === "runFinished") return; // it ended on its own
 *   throw e;
 * });
 */
export class RunControlError extends LoomError {
  declare readonly code: RunControlRefusal;
  readonly runId: string;
  constructor(code: RunControlRefusal, runId: string, message: string) {
    super(code, message);
    this.runId = runId;
  }
}

/** True when `e` is a `RunControlError`. */
export const isRunControlError = (e: unknown): e is RunControlError => e instanceof RunControlError;

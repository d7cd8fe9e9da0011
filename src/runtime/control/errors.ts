import { codesOf, errorGuard, LoomError } from "../../core/errors.ts";

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
export const isApprovalRefusedError = errorGuard(ApprovalRefusedError);

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
export const isRunControlError = errorGuard(RunControlError);

/** Why `deliverEvent` (or `loom deliver`, an `eventWebhook`) refused a delivery. */
export type EventDeliveryRefusal =
  /** The token is not one Loom made, or no call waits with its digest (forged, mistyped, another journal's). */
  | "eventUnknownToken"
  /** The event was delivered already (a token is single-use), or the wait ended otherwise. */
  | "eventAlreadyDelivered"
  /** The wait's timeout passed: the run feeds the model `wait-expired` when it resumes. */
  | "eventExpired"
  /** The payload has no JSON form. */
  | "eventPayloadInvalid";

/**
 * An event delivery was refused: an unknown (forged) token, a second delivery, an expired wait,
 * or a payload with no JSON form. Nothing was journaled.
 *
 * @example
 * await deliverEvent(journal, token, { paid: true }).catch((e) => {
 *   if (isEventDeliveryError(e) && e.code === "eventAlreadyDelivered") return; // a webhook retried
 *   throw e;
 * });
 */
export class EventDeliveryError extends LoomError {
  declare readonly code: EventDeliveryRefusal;
  /** The run and step the token names, when it names one. */
  readonly runId: string | undefined;
  readonly stepId: string | undefined;
  constructor(code: EventDeliveryRefusal, message: string, where?: { runId: string; stepId: string }) {
    super(code, message);
    this.runId = where?.runId;
    this.stepId = where?.stepId;
  }
}

/** True when `e` is an `EventDeliveryError`. */
export const isEventDeliveryError = errorGuard(EventDeliveryError, {
  codes: codesOf<EventDeliveryRefusal>({
    eventUnknownToken: true,
    eventAlreadyDelivered: true,
    eventExpired: true,
    eventPayloadInvalid: true,
  }),
});

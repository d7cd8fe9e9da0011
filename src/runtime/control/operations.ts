/**
 * Operating runs, from any process: list and answer pending approvals, cancel a
 * run, fork one from a step. Each function takes the journal and a run id, like `loop.run`.
 */

export {
  type ActivityFacts,
  activityOf,
  type RunActivity,
  type RunActivityInfo,
  runActivity,
} from "./activity.ts";
export {
  listPendingApprovals,
  type PendingApproval,
  type RecordApprovalOptions,
  type RecordedApproval,
  recordApproval,
  recordApprovals,
  type StepApproval,
} from "./approvals.ts";
export { type CancelOptions, type CancelResult, cancelRun, type SubRunCancel } from "./cancel.ts";
export {
  type ApprovalRefusal,
  ApprovalRefusedError,
  EventDeliveryError,
  type EventDeliveryRefusal,
  isApprovalRefusedError,
  isEventDeliveryError,
  isRunControlError,
  RunControlError,
  type RunControlRefusal,
} from "./errors.ts";
export { type EventHandlerOptions, eventFetchHandler, eventWebhook } from "./eventHttp.ts";
export { type DeliverEventOptions, type DeliveredEvent, deliverEvent } from "./events.ts";
export { type ForkOptions, type ForkResult, forkRun } from "./fork.ts";

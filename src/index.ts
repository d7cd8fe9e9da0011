/**
 * Loom: a durable, event-sourced agent loop on xstate v5. The front door: the loop and its
 * settings, the stores, operating runs (cancel, approvals, events, fork), reading runs, and the
 * errors with their guards. Named re-exports only. The journal's own vocabulary (entry types,
 * frame ids, folds, codecs, redaction, compaction, the statecharts and the pure policies) is in
 * `loom-agent/journal`.
 *
 * @module
 */

// Errors: every Loom error is a `LoomError` with a string `code`; each class has an `isXxx` guard.
export {
  AgentLoopConfigError,
  DefinitionChangedError,
  isAgentLoopConfigError,
  isDefinitionChangedError,
  isLoomError,
  isOwnershipLostError,
  isReplayDivergenceError,
  isRunBusyError,
  isRunCancelledError,
  isRunFailedError,
  isToolSourceError,
  LoomError,
  OwnershipLostError,
  ReplayDivergenceError,
  RunBusyError,
  RunCancelledError,
  RunFailedError,
  ToolSourceError,
} from "./core/index.ts";
export { isMissingDependencyError, MissingDependencyError } from "./core/optional.ts";
// The stores: a journal in memory or in one SQLite file (PostgreSQL: `loom-agent/postgres`).
export {
  createJournal,
  isJournalFileError,
  type Journal,
  JournalFileError,
  type MemoryStoreOptions,
  memoryStore,
  type OpenJournal,
  openSqliteJournal,
  readJournal,
  type SqliteOptions,
} from "./events/index.ts";
export { isModelCapabilityError, isModelStreamError, ModelCapabilityError, ModelStreamError } from "./models/errors.ts";
export {
  ScriptExhaustedError,
  type ScriptedResponse,
  scriptedModel,
} from "./models/scripted.ts";
export type {
  GenerateRequest,
  Message,
  Model,
  ModelResponse,
  ModelStreamPart,
  ToolCall,
  ToolDescriptor,
} from "./models/types.ts";
export type { ApprovalPolicy, ApprovalVerdict } from "./policies/approval.ts";
export type { Budget, ModelPrice, PriceTable } from "./policies/budget.ts";
export { type ContextPolicy, keepAll, recentTurns, type SummarizeOptions, summarize } from "./policies/context.ts";
export type { DefinitionChangePolicy } from "./policies/definition.ts";
// Reading runs: one vocabulary of events, read from the journal or followed live.
export { endsItsEntry, type RunEvent, runEventsOf } from "./projections/events.ts";
// Evals: a recorded run replayed against a changed agent, and two runs' tool calls compared.
export { diffRuns, type RunDiff } from "./projections/runDiff.ts";
export type {
  AgentOutput,
  AgentStep,
  InterruptedAgentRun,
  LeanAgentStep,
  RunWait,
  ToolCallLog,
  ToolCallLogMode,
} from "./projections/types.ts";
export type { TokenUsage } from "./projections/usage.ts";
// The loop and its settings.
export type {
  AgentLoopConfig,
  ApprovalAnswer,
  ApprovalRequest,
  InputCheck,
  RetryConfig,
  Skill,
  TimeoutsConfig,
  Tool,
  ToolContext,
  ToolSource,
  ToolSourceContext,
} from "./runtime/base/config.ts";
export {
  AgentInterruptedError,
  ApprovalInputError,
  isAgentInterruptedError,
  isApprovalInputError,
  isScheduleError,
  ScheduleError,
} from "./runtime/base/errors.ts";
export { rebuildToolCallLog } from "./runtime/base/readers.ts";
// Operating runs through the journal: approvals, cancel, events, fork, activity.
export { AmbiguousApprovalError, isAmbiguousApprovalError } from "./runtime/control/approvalAnswers.ts";
export {
  ApprovalRefusedError,
  type CancelOptions,
  type CancelResult,
  cancelRun,
  deliverEvent,
  EventDeliveryError,
  eventFetchHandler,
  eventWebhook,
  type ForkOptions,
  type ForkResult,
  forkRun,
  isApprovalRefusedError,
  isEventDeliveryError,
  isRunControlError,
  listPendingApprovals,
  type PendingApproval,
  type RecordApprovalOptions,
  type RunActivity,
  RunControlError,
  recordApproval,
  recordApprovals,
  runActivity,
} from "./runtime/control/operations.ts";
// Sessions, sub-agents, schedules and durable waits.
export type { SendRequest, SessionReply } from "./runtime/run/agentLoop.ts";
export { type AgentLoop, agentLoop$, type RunRequest } from "./runtime/run/agentLoop.ts";
export {
  type AgentToolOptions,
  agentTool,
  isSubAgentInterruptedError,
  isSubAgentLimitError,
  SubAgentInterruptedError,
  SubAgentLimitError,
} from "./runtime/run/agentTool.ts";
export { diffJournaledRuns } from "./runtime/run/readDiff.ts";
export {
  isReplayError,
  ReplayError,
  type ReplayOptions,
  type ReplayResult,
  replayRun,
} from "./runtime/run/replayRun.ts";
export {
  isUnknownSessionError,
  resumeSession,
  UnknownSessionError,
} from "./runtime/run/resumeSession.ts";
export {
  type RunningSchedules,
  runSchedules,
  startSchedules,
} from "./runtime/run/runSchedules.ts";
export { type Schedule, type ScheduleConfig, schedule } from "./runtime/run/schedule.ts";
export {
  isSessionBusyError,
  runConversation,
  SessionBusyError,
  sessionHistory,
  sessionRuns,
} from "./runtime/run/sessions.ts";
export { listWaits, wakeDueRuns } from "./runtime/run/waits.ts";
export { usageOfRun } from "./runtime/steps/budget.ts";
export { followRun } from "./runtime/streaming/follow.ts";
export type { AgentStream } from "./runtime/streaming/stream.ts";
export { isSubAgentCancelledError, SubAgentCancelledError } from "./runtime/subruns/subRuns.ts";
export { EventWait, sleepTool } from "./tools/wait.ts";

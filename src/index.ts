/**
 * Loom: a durable, event-sourced agent loop on xstate v5. Named re-exports only.
 */

export {
  AgentLoopConfigError,
  CanonicalJsonError,
  type CanonicalJsonErrorCode,
  ConcurrencyError,
  canonicalJson,
  DefinitionChangedError,
  type Digest,
  digestOf,
  IntegrityError,
  isAgentLoopConfigError,
  isCanonicalJsonError,
  isConcurrencyError,
  isDefinitionChangedError,
  isIntegrityError,
  isJournalFormatError,
  isLoomError,
  isOwnershipLostError,
  isReplayDivergenceError,
  isRunBusyError,
  isRunCancelledError,
  isRunFailedError,
  isToolSourceError,
  JournalFormatError,
  LoomError,
  MAX_CANONICAL_DEPTH,
  OwnershipLostError,
  ReplayDivergenceError,
  RunBusyError,
  RunCancelledError,
  RunFailedError,
  type RunHolderInfo,
  sha256Hex,
  ToolSourceError,
  type UnconfirmedLease,
} from "./core/index.ts";
export { isMissingDependencyError, MissingDependencyError } from "./core/optional.ts";
export { describeCause, errorCause } from "./events/errorCause.ts";
// The payload codec (issue 33): compression and encryption of what the journal stores.
export {
  type AcquireOptions,
  type AppendOptions,
  type ArchivedFrame,
  type ArchivedFrameDigest,
  type ArchiveStore,
  type AttemptError,
  type AttemptFailedData,
  type BlobInfo,
  type BlobRef,
  type BlobStore,
  type CallSettledData,
  type ClaimCheckEnvelope,
  type CodecEnvelope,
  type CompactOptions,
  type CompactRequest,
  type CompactResult,
  type CompletedRunValue,
  type Compression,
  checkRunId,
  claimCheckOf,
  codecArchive,
  codecBlobStore,
  codecStore,
  compact,
  createJournal,
  type DecisionRecordedData,
  type DefinitionPinData,
  dirBlobStore,
  type EntryDataByType,
  type EntryMeta,
  type EntryOf,
  type EntryType,
  type ErrorCause,
  type EventStore,
  escapeRunId,
  type ForkedFromData,
  type FrameCompletedData,
  type FrameStartedData,
  type FramesArchivedData,
  type InterruptReason,
  isClaimCheckEnvelope,
  isCodecEnvelope,
  isJournalFileError,
  isPayloadCodecError,
  isPruneNotSupportedError,
  type Journal,
  type JournalEntry,
  JournalFileError,
  type JournalFileErrorCode,
  type KeyProvider,
  type ListRunsOptions,
  MAX_RUN_ID_BYTES,
  type MemoryStoreOptions,
  memoryArchive,
  memoryBlobStore,
  memoryStore,
  type NewEntry,
  type OpenJournal,
  openSqliteJournal,
  type PayloadCodec,
  PayloadCodecError,
  type PayloadCodecErrorCode,
  type PayloadCodecOptions,
  type PinnedMode,
  PruneNotSupportedError,
  type PruneOptions,
  type PruneRequest,
  type PruneResult,
  payloadCodec,
  pruneRuns,
  type ReadArchivedOptions,
  RUN_ID_RULE,
  type RunCancelledData,
  type RunCompletedData,
  type RunFailedData,
  type RunInterruptedData,
  type RunLease,
  type RunStartedData,
  type RunSummary,
  readArchived,
  readJournal,
  readModePin,
  runIdProblem,
  SCHEMA_VERSION,
  type SettledReason,
  type SqliteArchiveStore,
  type SqliteDatabase,
  type SqliteEventStore,
  type SqliteOptions,
  sqliteArchive,
  sqliteBlobStore,
  sqliteStore,
  staticKeys,
  validateEntries,
  withCodec,
} from "./events/index.ts";
// How a run ends, and the events that end it from outside (issue 35: the chart owns every ending).
export type {
  AgentLoopContext,
  AgentLoopInput,
  Backoff,
  Ending,
  Interruption,
  StopEvent,
} from "./machines/agentLoop.machine.ts";
export {
  type ByCompletion,
  MODE_PIN_DECISIONS,
  type ModePinContext,
  type ModePinDecision,
  type ModePinEvent,
  type ModePinInput,
  type ModePinResolution,
  type ModePinState,
  type PinDecision,
  type ResolveModePinRequest,
  resolveModePin,
  validateToolCallLogMode,
} from "./machines/modePin.machine.ts";
export type { ToolCallInput } from "./machines/toolCall.machine.ts";

// The statecharts, typed by a `typeof` so the API reference names xstate's machine type instead
// of expanding every state's inferred config (their states are in docs/statecharts.md's diagrams).
import { agentLoopMachine as agentLoopChart } from "./machines/agentLoop.machine.ts";
import { modePinMachine as modePinChart } from "./machines/modePin.machine.ts";
import { toolCallMachine as toolCallChart } from "./machines/toolCall.machine.ts";

/**
 * The agent loop's statechart (xstate v5): model → tool calls (a `toolCallMachine` child for a
 * call that can wait on an approval or a retry; the run's one `plainCalls` actor for any other) →
 * results back → repeat. It only decides; `agentLoop$` provides the actors that do the
 * journaled work. `loom machine agentLoop --mermaid` draws it.
 *
 * @example
 * ```ts
 * import { agentLoopMachine } from "loom-agent";
 *
 * console.log(Object.keys(agentLoopMachine.states)); // ["starting", "running", "finishing", …]
 * ```
 */
export const agentLoopMachine: typeof agentLoopChart = agentLoopChart;

/**
 * The mode pin's statechart (ADR 0142 D3): the log's shape, fixed for the life of a run. Pure:
 * step it with xstate's `transition`.
 *
 * @example
 * ```ts
 * import { initialTransition, transition } from "xstate";
 * import { modePinMachine } from "loom-agent";
 *
 * const [s0] = initialTransition(modePinMachine, { loopId: "support", runId: "r1" });
 * const [s1] = transition(modePinMachine, s0, { type: "CONFIGURED", mode: "lean" });
 * s1.value; // "pinned-lean"
 * ```
 */
export const modePinMachine: typeof modePinChart = modePinChart;

/**
 * One tool call's statechart: validating → awaiting approval → running → settled. Its actors
 * are placeholders that `agentLoop$` replaces with `toolCallMachine.provide({ actors })`.
 *
 * @example
 * ```ts
 * import { toolCallMachine } from "loom-agent";
 *
 * console.log(toolCallMachine.toJSON()); // the chart's definition, as `loom machine toolCall --json`
 * ```
 */
export const toolCallMachine: typeof toolCallChart = toolCallChart;
// Schedules: a loop started at each tick of a cron pattern (issue 31).
// Run snapshots (issue 33): a resume reads the latest snapshot and the entries after it.
export {
  isSnapshotError,
  SnapshotError,
  type SnapshotErrorCode,
} from "./core/errors.ts";
// Redacted originals kept sealed under a per-run key, so a redacted run can be resumed; forgetting the key shreds them.
export { type DataKeyStore, memoryDataKeys } from "./events/dataKeys.ts";
export {
  approvalId,
  contextDecisionId,
  idempotencyKey,
  modelFrameId,
  modePinId,
  outcomeId,
  type ParsedFrameId,
  parseFrameId,
  type ScheduledRun,
  scheduledRunOf,
  scheduleRunId,
  scheduleTickOf,
  toolListId,
  toolStepId,
} from "./events/ids.ts";
// Redaction (issue 33): fields replaced in what the journal stores, verified by the original's digest.
export {
  isRedactionError,
  type Redaction,
  type RedactionContext,
  RedactionError,
  type RedactionErrorCode,
  type RedactionOptions,
  type RedactionRecord,
  type RedactionVerdict,
  redactedFields,
  redactingStore,
  redaction,
  verifyRedacted,
  type WithRedactionOptions,
  withRedaction,
} from "./events/redact.ts";
export {
  isRedactedOriginalsError,
  type KeepOriginalsOptions,
  RedactedOriginalsError,
  type RedactedOriginalsErrorCode,
  type SealedOriginals,
} from "./events/redactedOriginals.ts";
export { forgetRedactedOriginals } from "./events/redactedResume.ts";
export type { RedactionValue } from "./events/redactValues.ts";
export type { StoredSnapshot } from "./events/store.ts";
export { type ListedTool, readToolList, TOOL_LIST_SOURCE, type ToolListChoice } from "./events/toolList.ts";
export {
  isModelCapabilityError,
  isModelStreamError,
  ModelCapabilityError,
  ModelStreamError,
  type ModelStreamErrorCode,
} from "./models/errors.ts";
export type { ScriptedModelOptions } from "./models/scripted.ts";
export {
  type Script,
  type ScriptContext,
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
export {
  addUsage,
  type Budget,
  type BudgetBreach,
  type BudgetLimit,
  type BudgetUsage,
  budgetBreach,
  costOf,
  type ModelPrice,
  NO_USAGE,
  type PriceTable,
  remainingBudget,
  shareBudget,
} from "./policies/budget.ts";
export {
  type AskModel,
  applyContext,
  type ContextChoice,
  type ContextPolicy,
  type ContextView,
  keepAll,
  recentTurns,
  type SummarizeOptions,
  summarize,
} from "./policies/context.ts";
export {
  DEFINITION_CHANGE_KINDS,
  type DefinitionChange,
  type DefinitionChangeKind,
  type DefinitionChangePolicy,
  type DefinitionPin,
  type DefinitionSource,
  definitionPin,
} from "./policies/definition.ts";
export {
  attemptError,
  DEFAULT_MODEL_RETRY,
  DEFAULT_TOOL_RETRY,
  decideRetry,
  type RetryDecision,
  type RetryPolicy,
} from "./policies/retry.ts";
export { asWaitChoice, decideWait, type WaitChoice, type WaitDecision, waitDueAt } from "./policies/wait.ts";
// Streaming and following a run (DESIGN §7.1–7.2): one vocabulary of events, folded from the journal.
export {
  endsItsEntry,
  evolveRunEvents,
  initialRunEventState,
  isRunEnd,
  type JournaledEventFields,
  type JournaledRunEvent,
  type LiveEventFields,
  type LiveRunEvent,
  type RunEvent,
  type RunEventCursor,
  type RunEventError,
  type RunEventOptions,
  type RunEventState,
  type RunEventType,
  runEventsOf,
} from "./projections/events.ts";
export {
  type AgentLoopEvalSubject,
  agentLoopEvalSubject,
  type EvalToolCall,
  looksLikeError,
  toolNamesByIteration,
} from "./projections/readers.ts";
// Diffs of two runs' tool-call logs (docs/evals.md): calls aligned over tool and input digest.
export {
  type CallChange,
  type Delta,
  type DiffCall,
  type DiffCallSide,
  type DiffMatchMode,
  type DiffModelCall,
  type DiffOptions,
  type DiffUsage,
  diffRuns,
  type FirstDivergence,
  type JsonPatchOperation,
  jsonPatch,
  type RunDiff,
  type RunDiffSide,
  runDiffSideOf,
} from "./projections/runDiff.ts";
export {
  checkRunSnapshot,
  compactRunState,
  type LeftOutFacts,
  runSnapshotOf,
  type SnapshotAnchor,
  type SnapshotCheck,
  type SnapshotFacts,
} from "./projections/runSnapshot.ts";
export {
  type ApprovalWaitState,
  type AttemptState,
  type FrameState,
  foldEntries,
  type RunState,
  type RunStatus,
  responseAt,
} from "./projections/runState.ts";
export {
  ArchivedOutputError,
  completedOutput,
  type EndedToolCall,
  endedToolCalls,
  isArchivedOutputError,
  isFullToolCallLog,
  isLeanAgentStep,
  projectToolCallLog,
  recordedModePin,
  type ToolCallResult,
  type ToolCallSource,
  toLeanStep,
  toolCallResult,
} from "./projections/toolCallLog.ts";
export type {
  AgentOutput,
  AgentStep,
  InterruptedAgentRun,
  LeanAgentStep,
  RunWait,
  ToolCallLog,
  ToolCallLogMode,
} from "./projections/types.ts";
export { type TokenUsage, tokenUsage } from "./projections/usage.ts";
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
  isAgentInterruptedError,
  isRedactedHistoryError,
  isScheduleError,
  RedactedHistoryError,
  ScheduleError,
  type ScheduleErrorCode,
} from "./runtime/base/errors.ts";
export { HeldLease, type HoldLeaseOptions, holdLease, LEASE_MARGIN } from "./runtime/base/heldLease.ts";
export { DEFAULT_LEASE_MS, type RunOwnership } from "./runtime/base/ownership.ts";
export {
  foldRun,
  type HydrateOptions,
  hydrateArchived,
  hydrateForLog,
  isStepResolutionError,
  type ResolvedStep,
  rebuildToolCallLog,
  resolveStep,
  StepResolutionError,
  verifyTurnResults,
} from "./runtime/base/readers.ts";
export {
  type ReadRunState,
  type RunStateReadOptions,
  type RunTailRead,
  readRunState,
  readRunTail,
  type SnapshotConfig,
  type SnapshotReadOptions,
  writeRunSnapshot,
} from "./runtime/base/snapshots.ts";
export { AmbiguousApprovalError, isAmbiguousApprovalError } from "./runtime/control/approvalAnswers.ts";
// Durable waits (issue 31, docs/waits.md): sleeps and events as journaled waits, approvals listed beside them.
export {
  type ActivityFacts,
  type ApprovalRefusal,
  ApprovalRefusedError,
  activityOf,
  type CancelOptions,
  type CancelResult,
  cancelRun,
  type DeliverEventOptions,
  type DeliveredEvent,
  deliverEvent,
  EventDeliveryError,
  type EventDeliveryRefusal,
  type EventHandlerOptions,
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
  type RecordedApproval,
  type RunActivity,
  type RunActivityInfo,
  RunControlError,
  type RunControlRefusal,
  recordApproval,
  runActivity,
  type SubRunCancel,
} from "./runtime/control/operations.ts";
// Sessions, context policies and budgets (issue 32).
export type { SendRequest, SessionReply } from "./runtime/run/agentLoop.ts";
export { type AgentLoop, agentLoop$, type RunRequest } from "./runtime/run/agentLoop.ts";
export {
  type AgentToolOptions,
  agentTool,
  childRunId,
  DEFAULT_MAX_AGENT_DEPTH,
  DEFAULT_MAX_CONCURRENT_CHILDREN,
  isSubAgentInterruptedError,
  isSubAgentLimitError,
  SubAgentInterruptedError,
  type SubAgentLimit,
  SubAgentLimitError,
} from "./runtime/run/agentTool.ts";
export {
  type DiffRunRef,
  diffJournaledRuns,
  type ReadDiffSideOptions,
  readDiffSide,
} from "./runtime/run/readDiff.ts";
export {
  isReplayError,
  ReplayError,
  type ReplayErrorCode,
  type ReplayNewInput,
  type ReplayOptions,
  type ReplayResult,
  type ReplayToolMode,
  replayRun,
} from "./runtime/run/replayRun.ts";
export {
  isUnknownSessionError,
  type ResumeSessionRequest,
  resumeSession,
  UnknownSessionError,
} from "./runtime/run/resumeSession.ts";
export {
  type FiredTick,
  fireDueTicks,
  type RunningSchedules,
  type RunSchedulesOptions,
  runSchedules,
  type SkippedTicks,
  startSchedules,
  type TickReport,
} from "./runtime/run/runSchedules.ts";
export {
  type DueTicks,
  dueTicks,
  initialCursor,
  type MissedTicks,
  type Schedule,
  type ScheduleConfig,
  schedule,
} from "./runtime/run/schedule.ts";
export {
  isSessionBusyError,
  nextSessionTurn,
  runConversation,
  SessionBusyError,
  type SessionTurn,
  sessionHistory,
  sessionRunId,
  sessionRuns,
} from "./runtime/run/sessions.ts";
export { listWaits, type WakeOptions, type WokenRun, wakeDueRuns } from "./runtime/run/waits.ts";
export { usageOfRun } from "./runtime/steps/budget.ts";
export { type ModelStreamDelta, type StreamModelCallOptions, streamModelCall } from "./runtime/steps/modelStream.ts";
export { type FollowOptions, followRun } from "./runtime/streaming/follow.ts";
export type { AgentStream } from "./runtime/streaming/stream.ts";
export { subRunPath } from "./runtime/streaming/subRunEvents.ts";
export type { RunContext } from "./runtime/subruns/runContext.ts";
export { type ApprovalAnswers, approvalKey } from "./runtime/subruns/subRunApprovals.ts";
export {
  isSubAgentCancelledError,
  isSubAgentPendingError,
  SubAgentCancelledError,
  SubAgentPendingError,
} from "./runtime/subruns/subRuns.ts";
export type { ToolRun } from "./tools/spi.ts";
export {
  EventWait,
  type EventWaitOptions,
  isWaitRequest,
  type SleepOptions,
  type SleepToolInput,
  sleepTool,
  type WaitContext,
  WaitRequest,
} from "./tools/wait.ts";

/**
 * Loom's journal, below the front door (`loom-agent`): the entry and row types, the frame-id
 * grammar, the folds and projections over the entries, payload codecs and their envelopes,
 * redaction, compaction and pruning, canonical JSON and digests, the statecharts and the pure
 * policies they decide with. For tools that read, check, transform or test journals; an app that
 * runs loops needs only `loom-agent`.
 *
 * @example
 * ```ts
 * import { openSqliteJournal, readJournal } from "loom-agent";
 * import { foldEntries, parseFrameId } from "loom-agent/journal";
 *
 * const state = foldEntries(await readJournal(openSqliteJournal("loom.db"), "r1"));
 * console.log(state.status); // "completed", "waiting", …
 * parseFrameId("support#turn:0:tool:1"); // { kind: "tool", loopId: "support", turn: 0, index: 1 }
 * ```
 *
 * @module
 */

// Run snapshots: a resume reads the latest snapshot and the entries after it.
export { isSnapshotError, SnapshotError, type SnapshotErrorCode } from "./core/errors.ts";
// Canonical JSON and digests (what a frame's digest is computed over), and the errors of the
// journal's own reads and appends.
export {
  CanonicalJsonError,
  type CanonicalJsonErrorCode,
  ConcurrencyError,
  canonicalJson,
  type Digest,
  digestOf,
  IntegrityError,
  isCanonicalJsonError,
  isConcurrencyError,
  isIntegrityError,
  isJournalFormatError,
  JournalFormatError,
  MAX_CANONICAL_DEPTH,
  type RunHolderInfo,
  sha256Hex,
  type UnconfirmedLease,
} from "./core/index.ts";
// Redaction: fields replaced in what the journal stores, verified by the original's digest; the
// originals can be kept sealed under a per-run key, so a redacted run can be resumed, and
// forgetting the key shreds them.
export { type DataKeyStore, memoryDataKeys } from "./events/dataKeys.ts";
export { describeCause, errorCause } from "./events/errorCause.ts";
// The frame-id grammar: the ids the journal gives each model call, tool step, approval and outcome.
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
// The journal: entry and row types, run ids, stores below the front door, claim-check blobs,
// payload codecs (compression and encryption of what the journal stores), compaction and pruning.
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
  type ContinuesData,
  checkRunId,
  claimCheckOf,
  codecArchive,
  codecBlobStore,
  codecStore,
  compact,
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
  isPayloadCodecError,
  isPruneNotSupportedError,
  type JournalEntry,
  type JournalFileErrorCode,
  type KeyProvider,
  type ListRunsOptions,
  MAX_RUN_ID_BYTES,
  memoryArchive,
  memoryBlobStore,
  type NewEntry,
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
  type ReplayOfData,
  RUN_ID_RULE,
  type RunCancelledData,
  type RunCompletedData,
  type RunFailedData,
  type RunInterruptedData,
  type RunLease,
  type RunStartedData,
  type RunSummary,
  readArchived,
  readModePin,
  runIdProblem,
  SCHEMA_VERSION,
  type SettledReason,
  type SqliteArchiveStore,
  type SqliteDatabase,
  type SqliteEventStore,
  sqliteArchive,
  sqliteBlobStore,
  sqliteStore,
  staticKeys,
  validateEntries,
  withCodec,
} from "./events/index.ts";
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
} from "./events/redaction/redact.ts";
export {
  isRedactedOriginalsError,
  type KeepOriginalsOptions,
  RedactedOriginalsError,
  type RedactedOriginalsErrorCode,
  type SealedOriginals,
} from "./events/redaction/redactedOriginals.ts";
export { forgetRedactedOriginals } from "./events/redaction/redactedResume.ts";
export type { RedactionValue } from "./events/redaction/redactValues.ts";
export type { StoredSnapshot } from "./events/store.ts";
export { type ListedTool, readToolList, TOOL_LIST_SOURCE, type ToolListChoice } from "./events/toolList.ts";
// The statecharts' inputs, contexts and events (the charts themselves are below).
export type { AgentLoopContext, AgentLoopInput } from "./machines/agentLoop.machine.ts";
export type { Backoff, Ending, Interruption, StopEvent } from "./machines/agentLoop.protocol.ts";
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
export type { ModelStreamErrorCode } from "./models/errors.ts";
// The pure policies the loop decides with: budgets, context, definition changes, retries, waits.
export {
  addUsage,
  type BudgetBreach,
  type BudgetLimit,
  type BudgetUsage,
  budgetBreach,
  costOf,
  NO_USAGE,
  remainingBudget,
  shareBudget,
} from "./policies/budget.ts";
export { type AskModel, applyContext, type ContextChoice, type ContextView } from "./policies/context.ts";
export {
  DEFINITION_CHANGE_KINDS,
  type DefinitionChange,
  type DefinitionChangeKind,
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
export type { TickPolicy } from "./policies/schedule.ts";
export { asWaitChoice, decideWait, type WaitChoice, type WaitDecision, waitDueAt } from "./policies/wait.ts";
// Folds of the journal: run events, eval subjects, snapshots, the run's state, the tool-call log.
export {
  evolveRunEvents,
  initialRunEventState,
  isRunEnd,
  type JournaledEventFields,
  type JournaledRunEvent,
  type LiveEventFields,
  type LiveRunEvent,
  type RunEventCursor,
  type RunEventError,
  type RunEventOptions,
  type RunEventState,
  type RunEventType,
} from "./projections/events.ts";
export {
  type AgentLoopEvalSubject,
  agentLoopEvalSubject,
  type EvalToolCall,
  looksLikeError,
  toolNamesByIteration,
} from "./projections/readers.ts";
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
export { tokenUsage } from "./projections/usage.ts";
// Reading a run below the front door: leases, hydration, step resolution, snapshot reads, and
// the facts behind control, sessions, schedules, sub-agents and waits.
export { isRedactedHistoryError, RedactedHistoryError, type ScheduleErrorCode } from "./runtime/base/errors.ts";
export { HeldLease, type HoldLeaseOptions, holdLease, LEASE_MARGIN } from "./runtime/base/heldLease.ts";
// Sessions in linear space: a history that cannot be read back as its message named it.
export { isSessionHistoryError, recordedConversation, SessionHistoryError } from "./runtime/base/history.ts";
export { DEFAULT_LEASE_MS, type RunOwnership } from "./runtime/base/ownership.ts";
export {
  foldRun,
  type HydrateOptions,
  hydrateArchived,
  hydrateForLog,
  isStepResolutionError,
  type ResolvedStep,
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
export {
  type ActivityFacts,
  type ApprovalRefusal,
  activityOf,
  type DeliveredEvent,
  type EventDeliveryRefusal,
  type EventHandlerOptions,
  type RecordedApproval,
  type RunActivityInfo,
  type RunControlRefusal,
  type SubRunCancel,
} from "./runtime/control/operations.ts";
export {
  childRunId,
  DEFAULT_MAX_AGENT_DEPTH,
  DEFAULT_MAX_CONCURRENT_CHILDREN,
  type SubAgentLimit,
} from "./runtime/run/agentTool.ts";
export { type FiredTick, fireDueTicks, type SkippedTicks } from "./runtime/run/runSchedules.ts";
export { type DueTicks, dueTicks, initialCursor, type MissedTicks } from "./runtime/run/schedule.ts";
export { nextSessionTurn, type SessionTurn, sessionRunId } from "./runtime/run/sessions.ts";
export { type ModelStreamDelta, type StreamModelCallOptions, streamModelCall } from "./runtime/steps/modelStream.ts";
export { subRunPath } from "./runtime/streaming/subRunEvents.ts";
export type { RunContext } from "./runtime/subruns/runContext.ts";
export { type ApprovalAnswers, type ApprovalReply, approvalKey } from "./runtime/subruns/subRunApprovals.ts";
export { isSubAgentPendingError, SubAgentPendingError } from "./runtime/subruns/subRuns.ts";
export type { ToolRun } from "./tools/spi.ts";
export { isWaitRequest, type SleepToolInput, type WaitContext, WaitRequest } from "./tools/wait.ts";

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
 * import { agentLoopMachine } from "loom-agent/journal";
 *
 * console.log(Object.keys(agentLoopMachine.states)); // ["starting", "running", "finishing", …]
 * ```
 */
export const agentLoopMachine: typeof agentLoopChart = agentLoopChart;

/**
 * The mode pin's statechart: the tool-call log's shape (full or lean), chosen when a run starts
 * and fixed for the life of the run. Pure: step it with xstate's `transition`.
 *
 * @example
 * ```ts
 * import { initialTransition, transition } from "xstate";
 * import { modePinMachine } from "loom-agent/journal";
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
 * import { toolCallMachine } from "loom-agent/journal";
 *
 * console.log(toolCallMachine.toJSON()); // the chart's definition, as `loom machine toolCall --json`
 * ```
 */
export const toolCallMachine: typeof toolCallChart = toolCallChart;

// Option and detail types of the root's functions (the functions are in \`loom-agent\`).
export type { Script, ScriptContext, ScriptedModelOptions } from "./models/scripted.ts";
export type { ApprovalPolicyRequest } from "./policies/approval.ts";
// Evals: the diff's parts, one side of it read from a journal, and a replay's details.
export {
  type CallChange,
  type Delta,
  type DiffCall,
  type DiffCallSide,
  type DiffMatchMode,
  type DiffModelCall,
  type DiffOptions,
  type DiffUsage,
  type FirstDivergence,
  type JsonPatchOperation,
  jsonPatch,
  type RunDiffSide,
  runDiffSideOf,
} from "./projections/runDiff.ts";
export type { DeliverEventOptions, StepApproval } from "./runtime/control/operations.ts";
export { type DiffRunRef, type ReadDiffSideOptions, readDiffSide } from "./runtime/run/readDiff.ts";
export type { ReplayErrorCode, ReplayNewInput, ReplayToolMode } from "./runtime/run/replayRun.ts";
export type { ResumeSessionRequest } from "./runtime/run/resumeSession.ts";
export type { RunSchedulesOptions, TickReport } from "./runtime/run/runSchedules.ts";
export type { WakeOptions, WokenRun } from "./runtime/run/waits.ts";
export type { FollowOptions } from "./runtime/streaming/follow.ts";
export type { EventWaitOptions, SleepOptions } from "./tools/wait.ts";

/**
 * Loom: a durable, event-sourced agent loop on xstate v5. Named re-exports only.
 */
export {
  AgentLoopConfigError,
  CanonicalJsonError,
  type CanonicalJsonErrorCode,
  ConcurrencyError,
  canonicalJson,
  type Digest,
  digestOf,
  IntegrityError,
  isAgentLoopConfigError,
  isCanonicalJsonError,
  isConcurrencyError,
  isIntegrityError,
  isJournalFormatError,
  isLoomError,
  isReplayDivergenceError,
  JournalFormatError,
  LoomError,
  MAX_CANONICAL_DEPTH,
  ReplayDivergenceError,
  sha256Hex,
} from "./core/index.ts";
export { isMissingDependencyError, MissingDependencyError } from "./core/optional.ts";
export {
  type ArchivedFrame,
  type ArchiveStore,
  type BlobInfo,
  type BlobRef,
  type BlobStore,
  type CompactOptions,
  type CompactResult,
  type CompletedRunValue,
  compact,
  createJournal,
  dirBlobStore,
  type EntryOf,
  type EntryType,
  type EventStore,
  isPruneNotSupportedError,
  type Journal,
  type JournalEntry,
  memoryArchive,
  memoryBlobStore,
  memoryStore,
  type NewEntry,
  type OpenJournal,
  openSqliteJournal,
  PruneNotSupportedError,
  type PruneOptions,
  type PruneRequest,
  type PruneResult,
  pruneRuns,
  type ReadArchivedOptions,
  type RunSummary,
  readArchived,
  readJournal,
  SCHEMA_VERSION,
  sqliteArchive,
  sqliteBlobStore,
  sqliteStore,
  validateEntries,
} from "./events/index.ts";
export {
  type AgentLoopContext,
  type AgentLoopInput,
  agentLoopMachine,
} from "./machines/agentLoop.machine.ts";
export {
  type ModePinContext,
  type ModePinEvent,
  type ModePinInput,
  type ModePinResolution,
  type ModePinState,
  modePinMachine,
  type PinDecision,
  type ResolveModePinRequest,
  resolveModePin,
  validateToolCallLogMode,
} from "./machines/modePin.machine.ts";
export { type ToolCallInput, toolCallMachine } from "./machines/toolCall.machine.ts";
export { type Script, type ScriptContext, ScriptExhaustedError, scriptedModel } from "./models/scripted.ts";
export type { GenerateRequest, Message, Model, ModelResponse, ToolCall, ToolDescriptor } from "./models/types.ts";
export { approvalId, modelFrameId, modePinId, outcomeId, parseFrameId, toolStepId } from "./projections/ids.ts";
export {
  type AgentLoopEvalSubject,
  agentLoopEvalSubject,
  type EvalToolCall,
  looksLikeError,
  toolNamesByIteration,
} from "./projections/readers.ts";
export { type FrameState, foldEntries, type RunState, type RunStatus } from "./projections/runState.ts";
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
  ToolCallLog,
  ToolCallLogMode,
} from "./projections/types.ts";
export { type AgentLoop, agentLoop$, type RunRequest } from "./runtime/agentLoop.ts";
export type {
  AgentLoopConfig,
  ApprovalAnswer,
  ApprovalRequest,
  InputCheck,
  Skill,
  Tool,
  ToolContext,
} from "./runtime/config.ts";
export { type ClaimCheckEnvelope, isClaimCheckEnvelope } from "./runtime/conversation.ts";
export { AgentInterruptedError, isAgentInterruptedError } from "./runtime/errors.ts";
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
} from "./runtime/readers.ts";

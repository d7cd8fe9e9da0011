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
export {
  type AgentLoopEvalSubject,
  agentLoopEvalSubject,
  type EvalToolCall,
  looksLikeError,
  toolNamesByIteration,
} from "./projections/readers.ts";
export {
  ArchivedOutputError,
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
export type { AgentStep, LeanAgentStep, ToolCallLog, ToolCallLogMode } from "./projections/types.ts";

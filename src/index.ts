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

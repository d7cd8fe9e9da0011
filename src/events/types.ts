/**
 * The journal's schema: every entry type, as one discriminated union on `type`. Entries are
 * past-tense facts. Callers append `{ type, data }`; the store gives each entry its `runId`,
 * `seq` (1-based, no gaps except where compaction removed entries) and `meta`.
 */

/** The schema version written in every entry's `meta.v`. Readers refuse newer versions. */
export const SCHEMA_VERSION = 1;

/** What the store adds to every entry beside its data. */
export interface EntryMeta {
  /** Schema version of the entry. */
  readonly v: number;
  /** Wall clock at append (ISO 8601). Never enters a digest or a projection's decision. */
  readonly at: string;
}

/** A message of the conversation (the Model SPI's shape; see src/models/types.ts). */
export type Message =
  | { readonly role: "system" | "user"; readonly content: string }
  | { readonly role: "assistant"; readonly content?: string; readonly toolCalls: readonly ToolCall[] }
  | {
      readonly role: "tool";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly output: unknown;
      readonly isError: boolean;
    };

/** One tool call a model asked for. */
export interface ToolCall {
  /** The model's id for the call (paired with its result in the next prompt). */
  readonly id: string;
  readonly name: string;
  readonly input: unknown;
}

/** What a model frame records: the model's response (never its prompt). */
export interface ModelResponse {
  readonly content?: string;
  readonly toolCalls: readonly ToolCall[];
  readonly usage?: { readonly inputTokens?: number; readonly outputTokens?: number };
  /** Why the model stopped (`stop`, `tool-calls`, `length`…), when the model says. */
  readonly finishReason?: string;
}

/** Why a tool call was settled without running its tool. */
export type SettledReason =
  | "unknown-tool"
  | "input-too-large"
  | "invalid-input"
  | "approval-declined"
  /** A call waiting for approval longer than its tool's `approvalTimeoutMs`: declined, the model told. */
  | "approval-expired"
  /** Past `maxToolCallsPerResponse` in one model response: not run, the model told the limit. */
  | "too-many-calls"
  | "search-tools"
  | "skill-activation";

/** Why a run stopped before its answer. */
export type InterruptReason =
  | "aborted"
  | "max-iterations"
  | "approval-pending"
  | "model-error"
  | "deadline"
  /** A limit of the run's budget was reached before a model call (`detail`: the limit, the usage, the limits). */
  | "budget"
  /** A tool call waits for a time or an event (`ToolContext.sleep`, `waitForEvent`): see docs/waits.md. */
  | "waiting";

/** `run.started`: the run's first entry. */
export interface RunStartedData {
  readonly loopId: string;
  /**
   * A prompt string or a list of messages. With `continues`, only the messages this run adds after
   * the conversation it names (a session's new message).
   */
  readonly input: string | readonly Message[];
  readonly tools: readonly string[];
  /**
   * Digests of the loop's definition (loop id, system prompt, tools and their input schemas): a
   * resume under another definition is refused (`DefinitionChangedError`). Absent in runs
   * recorded before 0.3, which resume as they did.
   */
  readonly definition?: DefinitionPinData;
  /** Set on a run made by `forkRun`: the run it was copied from, and where. */
  readonly forkedFrom?: ForkedFromData;
  /**
   * Set on a session's message after the first: the conversation its input goes on from (the
   * previous message's), named instead of copied. The run's conversation is that history, then
   * `input`.
   */
  readonly continues?: ContinuesData;
  /** Set on a run made by `replayRun`: the recorded run it replays, and both definitions. */
  readonly replayOf?: ReplayOfData;
}

/** What a replay replays (`RunStartedData.replayOf`). */
export interface ReplayOfData {
  /** The recorded run. */
  readonly runId: string;
  /** The recorded run's last seq when the replay read it. */
  readonly seq: number;
  /** The recorded run's definition pin digest (null for a run recorded before pins). */
  readonly recorded: string | null;
  /** The candidate loop's definition pin digest. */
  readonly candidate: string;
}

/**
 * The conversation a session message's run goes on from (`RunStartedData.continues`): the
 * history of the session's previous message, which a reader rebuilds from that run's journal and
 * checks against `digest`.
 */
export interface ContinuesData {
  /** The previous message's run (`<sessionId>/<n-1>`). */
  readonly runId: string;
  /** That run's last seq when this run started: its history ends there. */
  readonly seq: number;
  /** The history's chained digest (sha256 hex, see `historyDigest`): each message's part chained on the one before. */
  readonly digest: string;
  /** How many messages the history holds. */
  readonly messages: number;
}

/** Where a forked run came from (`RunStartedData.forkedFrom`). */
export interface ForkedFromData {
  /** The source run. */
  readonly runId: string;
  /** The source's seq the fork starts at: the fork holds the source's entries before it. */
  readonly seq: number;
  /** The step the fork was asked to start at, when it was given as a step id. */
  readonly stepId?: string;
  /**
   * How many entries the fork was made with (absent in forks made before 0.3): a fork whose
   * journal has no entry past them was never resumed (`runActivity`: `not-started`).
   */
  readonly entries?: number;
}

/** What `run.started` records of the loop's definition (see src/policies/definition.ts). */
export interface DefinitionPinData {
  /** sha256 hex of the loop id and every part below. */
  readonly digest: string;
  /** The system prompt's digest (16 hex), or null when the loop has none. */
  readonly system: string | null;
  /** Each tool's name → its input schema's digest (16 hex), or null for a tool without one. */
  readonly tools: Readonly<Record<string, string | null>>;
  /**
   * The names of the loop's tool sources (`toolSources`: MCP servers), sorted; absent when it has
   * none (so the pins of loops without sources are as before). Their tool lists are not pinned:
   * each run journals its own.
   */
  readonly sources?: readonly string[];
}

/** `decision.recorded`: a choice made once and served on replay (an approval, the mode pin, a failure's outcome). */
export interface DecisionRecordedData {
  /** `<loop>#toolCallLog`, `<stepId>:outcome`, `<stepId>:approval`. */
  readonly decisionId: string;
  /** `agent-tool-call-log`, `tool-outcome`, `approval`. */
  readonly source: string;
  readonly choice: unknown;
}

/** `frame.started`: the write-ahead intent of a durable step (a model or tool call). */
export interface FrameStartedData {
  /** `<loop>#turn:<i>:model` or `<loop>#turn:<i>:tool:<j>`. */
  readonly frameId: string;
  /** `model`, or `tool:<name>`. */
  readonly effect: string;
  /** sha256 hex: of the tool input, or the chained digest of the prompt for a model frame. */
  readonly inputDigest: string;
}

/** `frame.completed`: a durable step's result (or, for a failed effect, that it failed). */
export type FrameCompletedData =
  | {
      readonly frameId: string;
      /**
       * Tool frames: `digestOf(output)` (the lean log's `digest` and `bytes`), recorded with the
       * output so a reader of the lean shape never hashes outputs again; `resolveStep` and
       * `loom show` check it against the output. Absent on model frames and on entries written
       * by Loom 0.1.0 (readers then compute it).
       */
      readonly digest?: string | null;
      readonly bytes?: number;
      /**
       * Set (true) by the runtime when `output` is the claim-check envelope it wrote in place of
       * a large output (src/events/claimCheck.ts). Never inside the output, which a tool controls:
       * an envelope-shaped output without it is plain data.
       */
      readonly claimChecked?: true;
      readonly output: unknown;
      readonly failed?: undefined;
    }
  /** The effect failed: no output. What the model was fed is the `<frameId>:outcome` decision. */
  | { readonly frameId: string; readonly failed: true; readonly output?: undefined };

/** `call.settled`: a tool call answered without running its tool (a refusal, a declined approval, a built-in). */
export interface CallSettledData {
  /** The tool step id `<loop>#turn:<i>:tool:<j>` the call would have had. */
  readonly stepId: string;
  readonly status: "ok" | "error";
  readonly reason: SettledReason;
  /** What the model was fed. */
  readonly result: unknown;
}

/** What a `frames.archived` marker keeps of each moved frame, to verify it when read back. */
export interface ArchivedFrameDigest {
  readonly digest: string | null;
  readonly bytes: number;
  /** The frame's effect and input digest, so the replay guard still judges an archived frame. */
  readonly effect?: string;
  readonly inputDigest?: string;
  /** The frame completed as failed (no output; its outcome decision stays in the hot journal). */
  readonly failed?: boolean;
  /** A redacted output (`withRedaction`): the digest its frame recorded, the original's (the lean log's); `digest` is the stored output's. */
  readonly original?: { readonly digest: string | null; readonly bytes: number };
}

/** `frames.archived`: the marker `compact` leaves where it moved frames to the archive. */
export interface FramesArchivedData {
  readonly frameIds: readonly string[];
  /** Where the archive keeps them (an archive-store key). */
  readonly archiveRef: string;
  /** digestOf each archived frame's output (null, 0 for a failed frame), by frame id. */
  readonly digests: Readonly<Record<string, ArchivedFrameDigest>>;
  /**
   * The seqs of the entries compaction removed (both entries of each frame, and any earlier
   * start of a retried frame): the validator accepts a seq gap only where a marker lists it.
   */
  readonly seqs?: readonly number[];
}

/** `run.completed`: the run's answer (the log is not in it: it is rebuilt from the frames). */
export interface RunCompletedData {
  /**
   * What the loop's value holds beside its tool-call log: `{ content, iterations }`. The log is
   * not repeated here: it is a projection of the frames, rebuilt in the run's shape when the
   * value is returned. (Entries written by Loom 0.1.0 also hold `toolCallLog`; readers ignore it.)
   */
  readonly output: CompletedRunValue;
}

/** The part of a completed run's value that only `run.completed` records. */
export interface CompletedRunValue {
  /** The model's final answer. */
  readonly content: string;
  /** Number of model calls the run made. */
  readonly iterations: number;
}

/** `run.interrupted`: the run stopped before its answer and can be resumed. */
export interface RunInterruptedData {
  readonly reason: InterruptReason;
  readonly detail: unknown;
  /** The error that stopped the run (a `model-error`), so a reader after a restart still knows why. */
  readonly cause?: ErrorCause;
}

/**
 * A failed effect's error as the journal keeps it: what tells a 401 from a 429 or a network
 * failure, never the whole error object (headers, bodies and stacks stay out of the journal).
 */
export interface ErrorCause {
  /** The error's `name` (`APICallError`, `TypeError`…). */
  readonly name: string;
  /** Its message (at most 2,000 characters). */
  readonly message: string;
  /** The HTTP status, when the error carries one (AI SDK `statusCode`, or `status`). */
  readonly status?: number;
  /** Whether the error says a retry may succeed (AI SDK `isRetryable`), when it says. */
  readonly retryable?: boolean;
}

/**
 * A failed attempt's error as the journal records it: its cause (`ErrorCause`) with
 * retryability decided, and how long the server asked to wait (see `attemptError`).
 */
export interface AttemptError extends ErrorCause {
  /** Whether trying again may succeed (decided: never for 400, 401, 403; see `attemptError`). */
  readonly retryable: boolean;
  /** How long the server asked to wait (`retry-after-ms`, or `retry-after` in seconds or as a date). */
  readonly retryAfterMs?: number;
}

/**
 * `attempt.failed`: one attempt of a durable step (a model call, a tool call) failed. The frame
 * stays started; the next attempt appends `frame.started` again. `retryAt` is when that attempt
 * is due (ms since the epoch), so a resume waits only what remains; null when none follows.
 */
export interface AttemptFailedData {
  /** The step's frame id (the model frame, or the tool step id). */
  readonly frameId: string;
  /** 1-based: the attempt that failed, counted over the run's whole journal. */
  readonly attempt: number;
  readonly error: AttemptError;
  readonly retryAt: number | null;
}

/**
 * `run.cancelled`: the run was cancelled (`cancelRun`) and ends here: it is never resumed.
 */
export interface RunCancelledData {
  /** Why, as the canceller said. */
  readonly reason: string;
}

/** `run.failed`: the run ended with an error (its name, code and message). */
export interface RunFailedData {
  readonly error: { readonly name: string; readonly code?: string; readonly message: string };
}

/** Maps each entry type to its data. The one place the schema is written down. */
export interface EntryDataByType {
  "run.started": RunStartedData;
  "decision.recorded": DecisionRecordedData;
  "frame.started": FrameStartedData;
  "frame.completed": FrameCompletedData;
  "call.settled": CallSettledData;
  "frames.archived": FramesArchivedData;
  "run.completed": RunCompletedData;
  "run.interrupted": RunInterruptedData;
  "run.failed": RunFailedData;
  "attempt.failed": AttemptFailedData;
  "run.cancelled": RunCancelledData;
}

/** Every entry type (`run.started`, `frame.completed`, …). */
export type EntryType = keyof EntryDataByType;

export const ENTRY_TYPES: readonly EntryType[] = [
  "run.started",
  "decision.recorded",
  "frame.started",
  "frame.completed",
  "call.settled",
  "frames.archived",
  "run.completed",
  "run.interrupted",
  "run.failed",
  "attempt.failed",
  "run.cancelled",
];

/** What a caller appends. */
export type NewEntry = { [T in EntryType]: { readonly type: T; readonly data: EntryDataByType[T] } }[EntryType];

/** What a store hands back. */
export type JournalEntry = {
  [T in EntryType]: {
    readonly runId: string;
    readonly seq: number;
    readonly type: T;
    readonly data: EntryDataByType[T];
    readonly meta: EntryMeta;
  };
}[EntryType];

/**
 * The entry of type `T`, as a store hands it back.
 *
 * @example
 * ```ts
 * const frames = entries.filter((e): e is EntryOf<"frame.completed"> => e.type === "frame.completed");
 * ```
 */
export type EntryOf<T extends EntryType> = Extract<JournalEntry, { type: T }>;

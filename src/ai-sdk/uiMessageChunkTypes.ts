import type { RunEvent } from "../projections/events.ts";

/**
 * The vocabulary of `toUIMessageStream`: the AI SDK UI message chunks it sends, written here
 * structurally so nothing loads `ai`.
 */

/**
 * The AI SDK UI message chunks (`UIMessageChunk` of `ai` 5 and 6) that `toUIMessageStream` sends.
 * Two transient data chunks (`onData` in `useChat`, never stored in the message) say what the
 * chunks cannot: `data-loom-retrying` (an attempt failed and will be retried: the next is due at
 * `retryAt`; a failure that is not retried, such as a 401, sends none: the `error` chunk ends the
 * run) and
 * `data-loom-reset` (the deltas of that attempt are void; the text already shown of it stays in
 * the message, ended, since a UI message stream cannot take text back). A third,
 * `data-loom-subagent`, carries each event of a sub-agent (`agentTool`) as its call's progress.
 *
 * @example
 * ```ts
 * useChat({ onData: (chunk) => chunk.type === "data-loom-retrying" && showRetrying(chunk.data.retryAt) });
 * ```
 */
export type LoomUIMessageChunk =
  | { readonly type: "start"; readonly messageId?: string; readonly messageMetadata?: unknown }
  | { readonly type: "start-step" | "finish-step" }
  | { readonly type: "finish"; readonly finishReason?: "stop" | "tool-calls" | "error" | "other" }
  | { readonly type: "abort"; readonly reason?: string }
  | { readonly type: "error"; readonly errorText: string }
  | { readonly type: "text-start" | "text-end" | "reasoning-start" | "reasoning-end"; readonly id: string }
  | { readonly type: "text-delta" | "reasoning-delta"; readonly id: string; readonly delta: string }
  | { readonly type: "tool-input-start"; readonly toolCallId: string; readonly toolName: string }
  | { readonly type: "tool-input-delta"; readonly toolCallId: string; readonly inputTextDelta: string }
  | {
      readonly type: "tool-input-available";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly input: unknown;
    }
  | {
      readonly type: "tool-input-error";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly input: unknown;
      readonly errorText: string;
    }
  | { readonly type: "tool-approval-request"; readonly approvalId: string; readonly toolCallId: string }
  | { readonly type: "tool-output-available"; readonly toolCallId: string; readonly output: unknown }
  | { readonly type: "tool-output-error"; readonly toolCallId: string; readonly errorText: string }
  | { readonly type: "tool-output-denied"; readonly toolCallId: string }
  | {
      readonly type: "data-loom-retrying";
      readonly data: {
        readonly stepId: string;
        readonly attempt: number;
        readonly error: string;
        /** When the next attempt is due (ISO 8601). */
        readonly retryAt: string;
      };
      readonly transient: true;
    }
  | {
      readonly type: "data-loom-reset";
      readonly data: { readonly stepId: string; readonly attempt: number };
      readonly transient: true;
    }
  /** An event of a sub-agent (`agentTool`) the call `toolCallId` runs: the tool's progress. */
  | {
      readonly type: "data-loom-subagent";
      readonly data: {
        readonly toolCallId: string;
        /** The calls from the run down to the sub-agent's run (`subRunPath`). */
        readonly path: readonly string[];
        readonly event: RunEvent;
      };
      readonly transient: true;
    };

/**
 * Options of `toUIMessageStream`.
 *
 * @example
 * toUIMessageStream(events, { messageId: "msg-42", onError: () => "Something went wrong." });
 */
export interface ToUIMessageStreamOptions {
  /** The assistant message's id, sent in `start`. Default: the run id. */
  readonly messageId?: string;
  /** The text of the `error` chunk sent when `events` throws. Default: the error's message. */
  readonly onError?: (error: unknown) => string;
  /**
   * Events the client was already sent, in an earlier response (a run resumed after an approval:
   * `runEventsOf(await readJournal(journal, runId))` before the resume). Nothing is sent for them;
   * their tool calls are known, so the resumed run's outputs land on the same tool parts (the
   * model's call ids) instead of new ones. With `messageId` set to the assistant message's id,
   * `useChat` goes on with that message.
   */
  readonly shown?: Iterable<RunEvent>;
  /**
   * Metadata of the assistant message, sent in `start` (`useChat` keeps it in `message.metadata`):
   * a session's id (`{ sessionId }`, see `loop.sendStream`), so the client knows which conversation
   * the answer belongs to.
   */
  readonly messageMetadata?: unknown;
}

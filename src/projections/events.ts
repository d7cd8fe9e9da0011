import type { ErrorCause, InterruptReason, Message, ModelResponse, ToolCall } from "../events/types.ts";

/**
 * Where a journaled event sits in its run: the `seq` of the entry that produced it. A client
 * that reconnects with the last cursor it saw gets exactly the events after it.
 */
export type RunEventCursor = number;

/** Fields every journaled event has: its run and the cursor of the entry it comes from. */
export interface JournaledEventFields {
  readonly runId: string;
  readonly cursor: RunEventCursor;
}

/** Fields of a live-only event (a delta, a reset): never journaled, so no cursor. */
export interface LiveEventFields {
  readonly runId: string;
}

/** The error of a failed attempt, as `attempt.failed` journals it. */
export type RunEventError = Pick<ErrorCause, "name" | "message" | "status"> & { readonly retryable: boolean };

/**
 * What happens in a run, as everything that watches one sees it (DESIGN §7.1): a projection of
 * the journal (each event carries its entry's `seq` as `cursor`) plus the live deltas of the model
 * call in flight. `loop.stream`, `run({ onEvent })`, `followRun`, `toUIMessageStream`, the
 * viewer and telemetry all read this one vocabulary.
 *
 * @example
 * ```ts
 * for await (const event of loop.stream({ runId: "r-1", input: "Hi", journal })) {
 *   if (event.type === "text-delta") process.stdout.write(event.delta);
 * }
 * ```
 */
export type RunEvent =
  | (JournaledEventFields & {
      readonly type: "run-started";
      readonly loopId: string;
      readonly input: string | readonly Message[];
    })
  | (JournaledEventFields & {
      readonly type: "model-started";
      readonly stepId: string;
      readonly turn: number;
      readonly attempt: number;
    })
  | (LiveEventFields & {
      readonly type: "text-delta";
      readonly stepId: string;
      readonly attempt: number;
      readonly delta: string;
    })
  | (LiveEventFields & {
      readonly type: "reasoning-delta";
      readonly stepId: string;
      readonly attempt: number;
      readonly delta: string;
    })
  | (LiveEventFields & {
      readonly type: "tool-input-delta";
      readonly stepId: string;
      readonly attempt: number;
      readonly toolCallId: string;
      readonly toolName: string;
      readonly delta: string;
    })
  | (JournaledEventFields & {
      readonly type: "model-retrying";
      readonly stepId: string;
      readonly attempt: number;
      readonly error: RunEventError;
      /** When the next attempt is due (ISO 8601), or null when none follows. */
      readonly retryAt: string | null;
    })
  | (JournaledEventFields & {
      readonly type: "model-finished";
      readonly stepId: string;
      readonly turn: number;
      readonly content: string | undefined;
      readonly toolCalls: readonly ToolCall[];
      readonly usage?: ModelResponse["usage"];
      readonly finishReason?: string;
    })
  | (JournaledEventFields & {
      readonly type: "tool-started";
      readonly stepId: string;
      readonly toolName: string;
      readonly input: unknown;
    })
  | (JournaledEventFields & {
      readonly type: "tool-finished";
      readonly stepId: string;
      readonly toolName: string;
      readonly status: "ok" | "error";
      readonly digest: string | null;
      readonly bytes: number;
      /** The output as fed to the model; omitted in lean mode (the digest stands for it). */
      readonly output?: unknown;
    })
  | (JournaledEventFields & {
      readonly type: "call-settled";
      readonly stepId: string;
      readonly toolName: string;
      readonly status: "ok" | "error";
      readonly reason: string;
    })
  | (JournaledEventFields & {
      readonly type: "approval-requested";
      readonly stepId: string;
      readonly toolName: string;
      readonly input: unknown;
      readonly inputDigest: string | null;
    })
  | (JournaledEventFields & {
      readonly type: "approval-decided";
      readonly stepId: string;
      readonly approved: boolean;
      readonly by?: string;
    })
  | (JournaledEventFields & {
      readonly type: "run-interrupted";
      readonly reason: InterruptReason;
      readonly detail: unknown;
      readonly cause?: ErrorCause;
    })
  | (JournaledEventFields & { readonly type: "run-cancelled"; readonly reason: string })
  | (JournaledEventFields & { readonly type: "run-completed"; readonly content: string; readonly iterations: number })
  | (LiveEventFields & { readonly type: "reset"; readonly stepId: string; readonly attempt: number });

/** The `type` of a {@link RunEvent}. */
export type RunEventType = RunEvent["type"];

/** The events a journal entry can produce (every type but the live-only ones). */
export type JournaledRunEvent = Exclude<
  RunEvent,
  { type: "text-delta" | "reasoning-delta" | "tool-input-delta" | "reset" }
>;

/** The live-only events: deltas of the model call in flight, and `reset`. */
export type LiveRunEvent = Extract<RunEvent, { type: "text-delta" | "reasoning-delta" | "tool-input-delta" | "reset" }>;

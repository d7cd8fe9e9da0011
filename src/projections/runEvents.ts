import type { ErrorCause, InterruptReason, Message, ModelResponse, RunFailedData, ToolCall } from "../events/types.ts";

/**
 * Where a journaled event sits in its run: the `seq` of the entry that produced it. A client
 * that reconnects with the last cursor it saw gets exactly the events after it.
 *
 * @example
 * ```ts
 * const after: RunEventCursor = Number(request.headers["last-event-id"] ?? 0);
 * for await (const event of followRun(journal, runId, { after })) send(event);
 * ```
 */
export type RunEventCursor = number;

/** Fields every journaled event has: its run and the cursor of the entry it comes from. */
export interface JournaledEventFields {
  readonly runId: string;
  readonly cursor: RunEventCursor;
}

/** Fields of a live event (a delta, a live `reset`): never journaled, so no cursor. */
export interface LiveEventFields {
  readonly runId: string;
}

/**
 * The error of a failed attempt, as `attempt.failed` journals it.
 *
 * @example
 * ```ts
 * if (event.type === "model-retrying") console.warn(`${event.error.name} (${event.error.status}), again at ${event.retryAt}`);
 * ```
 */
export type RunEventError = Pick<ErrorCause, "name" | "message" | "status"> & { readonly retryable: boolean };

/**
 * What happens in a run, as everything that watches one sees it: a projection of
 * the journal (each event carries its entry's `seq` as `cursor`) plus the live deltas of the model
 * call in flight. `loop.stream`, `run({ onEvent })`, `followRun`, `toUIMessageStream`, the
 * viewer and telemetry all read this one vocabulary.
 *
 * Nested events: a run's sub-agents (`agentTool`, each the child run `<parentRunId>/<stepId>`)
 * have their events in the parent's `loop.stream`, `onEvent` and `followRun`, each as the child's
 * run gives it, so marked by its `runId` (the child's, and its `cursor` is the child's journal's).
 * `subRunPath(parentRunId, event)` gives the calls from the parent down to the child (`[]` for the
 * parent's own events): a UI nests the event under the parent's call `path[0]`. Telemetry gets
 * the run's own events only.
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
      /**
       * The output as journaled (what the model was fed, or for a claim-checked output its envelope,
       * which `resolveStep` reads back); omitted in lean mode (the digest stands for it).
       */
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
  /** The run ended with an error (`run.failed`): its name, code and message. */
  | (JournaledEventFields & { readonly type: "run-failed"; readonly error: RunFailedData["error"] })
  /**
   * The deltas of attempt `attempt` of model call `stepId` are void: keep a call's deltas after its
   * last reset. Journaled (a cursor) when the journal says so: with a failed attempt's
   * `model-retrying` (its `attempt.failed`), and before the `model-started` of a call a resume asks
   * again whose attempt never ended (its process died mid-stream), so a client that got those
   * deltas and reconnects elsewhere drops them. Live (no cursor) for an attempt stopped in this
   * process (an abort, the run's deadline).
   */
  | ((LiveEventFields | JournaledEventFields) & {
      readonly type: "reset";
      readonly stepId: string;
      readonly attempt: number;
    });

/**
 * The `type` of a {@link RunEvent}.
 *
 * @example
 * ```ts
 * const shown: RunEventType[] = ["text-delta", "tool-started", "tool-finished", "run-completed"];
 * ```
 */
export type RunEventType = RunEvent["type"];

/**
 * The events a journal entry can produce (every type but the deltas; `reset` of a failed attempt,
 * or of a call a resume asks again): each has a `cursor`.
 *
 * @example
 * ```ts
 * const events: JournaledRunEvent[] = runEventsOf(entries);
 * const last = events.at(-1)?.cursor;
 * ```
 */
export type JournaledRunEvent =
  | Exclude<RunEvent, { type: "text-delta" | "reasoning-delta" | "tool-input-delta" | "reset" }>
  | (JournaledEventFields & { readonly type: "reset"; readonly stepId: string; readonly attempt: number });

/**
 * The live events: deltas of the model call in flight, and the `reset` of an attempt stopped in
 * this process (an abort, the deadline). No cursor: never journaled.
 *
 * @example
 * ```ts
 * const isLive = (e: RunEvent): e is LiveRunEvent => !("cursor" in e);
 * ```
 */
export type LiveRunEvent =
  | Extract<RunEvent, { type: "text-delta" | "reasoning-delta" | "tool-input-delta" }>
  | (LiveEventFields & { readonly type: "reset"; readonly stepId: string; readonly attempt: number });

/**
 * Whether `event` is the last one its journal entry gives, so a client that has seen it has seen
 * every event of that entry: what a server-sent event's `id:` may name, since a reconnect with
 * `Last-Event-ID: <cursor>` resumes after the whole entry. An entry gives several events only as
 * `reset` then `model-started` or `model-retrying`, and `approval-requested`s then
 * `run-interrupted`; deltas have no cursor.
 *
 * @example
 * ```ts
 * const frame = (e: RunEvent) => `${endsItsEntry(e) ? `id: ${e.cursor}\n` : ""}data: ${JSON.stringify(e)}\n\n`;
 * ```
 */
export function endsItsEntry(event: RunEvent): event is JournaledRunEvent {
  return "cursor" in event && event.type !== "reset" && event.type !== "approval-requested";
}

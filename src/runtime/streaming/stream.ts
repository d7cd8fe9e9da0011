import type { RunEvent } from "../../projections/events.ts";
import type { AgentOutput, ToolCallLogMode } from "../../projections/types.ts";
import { isAgentInterruptedError } from "../base/errors.ts";
import { DEFAULT_STREAM_BUFFER, EventQueue } from "./events.ts";

/**
 * A run as it happens (`loop.stream`): its events as an async iterable, and its value. The
 * iteration ends after the run's last event; it throws what `run` would have thrown, except for
 * an interruption (`AgentInterruptedError`), which the `run-interrupted` event already told.
 *
 * A resumed run streams what this call does (its events after the journal it resumed from); a
 * completed run's call does nothing, so its stream is empty: `followRun` gives a run's history.
 * Iterate it once.
 *
 * A consumer that reads slowly never slows the run: events wait in a buffer that drops deltas
 * (never journaled events) once `DEFAULT_STREAM_BUFFER` events wait; the model call's
 * `model-finished` still carries its whole content. Reading none of it is fine too.
 *
 * @example
 * ```ts
 * const stream = loop.stream({ runId: "r-1", input: "Hi", journal });
 * for await (const event of stream) if (event.type === "model-finished") console.log(event.content);
 * const { content } = await stream.output; // rejects as run does
 * ```
 */
export interface AgentStream<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined>
  extends AsyncIterable<RunEvent> {
  /** The loop's value: resolves or rejects as `loop.run` does. */
  readonly output: Promise<AgentOutput<M>>;
}

/** Runs `start` with an `onEvent` feeding a buffer, and hands both back as an `AgentStream`. */
export function streamOf<M extends ToolCallLogMode | undefined>(
  start: (onEvent: (event: RunEvent) => void) => Promise<AgentOutput<M>>,
  limit = DEFAULT_STREAM_BUFFER,
): AgentStream<M> {
  const queue = new EventQueue(limit);
  const output = start((event) => queue.push(event));
  output.then(
    () => queue.end(),
    (error: unknown) => queue.end(isAgentInterruptedError(error) ? undefined : { error }),
  );
  return { output, [Symbol.asyncIterator]: () => queue[Symbol.asyncIterator]() };
}

/** Both listeners, the caller's first (`stream({ onEvent })` still tells its own). */
export function chainListeners(
  first: ((event: RunEvent) => void) | undefined,
  second: (event: RunEvent) => void,
): (event: RunEvent) => void {
  if (first === undefined) return second;
  return (event) => {
    try {
      first(event);
    } finally {
      second(event);
    }
  };
}

/**
 * One attempt of a model call, as the durable step runs it, by Loom's one streaming rule
 * (`streamModelCall`): streamed whenever the model can, whoever watches (a plain run, a worker,
 * telemetry alone), else `generate`. Deltas go out as live RunEvents only when something watches
 * the run. Either way the response is the same and is what the journal records:
 * streaming adds nothing to the journal.
 */
import type { Message, ModelResponse } from "../../events/types.ts";
import type { StepStop } from "../base/runStop.ts";
import { callModel } from "./modelStream.ts";
import type { RunSession } from "./session.ts";

/** Told when an attempt first streams a delta (the caller then owes watchers a `reset` if it fails). */
export interface DeltaListener {
  delta(attempt: number): void;
}

/**
 * Asks the run's model once. `streaming` is told the first time this attempt streams a delta (the
 * caller then owes watchers a `reset` if the attempt fails).
 *
 * @example
 * const response = await askModel(session, stop, frameId, attempt, { delta: (a) => (streamed = a) });
 */
export function askModel(
  session: RunSession,
  stop: StepStop,
  frameId: string,
  attempt: number,
  streaming: DeltaListener,
): Promise<ModelResponse> {
  // After a compact resume, the conversation before its tail is read from the journal first (once);
  // else it is at hand, and asked at once.
  const messages = session.conversation.atHand();
  if (messages !== undefined) return ask(session, messages, stop, frameId, attempt, streaming);
  return session.conversation.whole().then((all) => ask(session, all, stop, frameId, attempt, streaming));
}

function ask(
  session: RunSession,
  messages: readonly Message[],
  stop: StepStop,
  frameId: string,
  attempt: number,
  streaming: DeltaListener,
): Promise<ModelResponse> {
  const { model, timeouts } = session.config;
  // The signal is made when the model reads it: a model that never looks costs the step none.
  const request = {
    messages: session.conversation.prompt ?? messages,
    tools: session.toolDescriptors,
    get signal(): AbortSignal {
      return stop.signal;
    },
  };
  const runId = session.options.runId;
  return callModel(
    model,
    request,
    {
      firstChunkMs: timeouts?.firstChunkMs,
      chunkIdleMs: timeouts?.chunkIdleMs,
      runId,
      stepId: frameId,
      onPart: session.events.watched()
        ? (part) => {
            streaming.delta(attempt);
            session.events.emitLive({ ...part, runId, stepId: frameId, attempt });
          }
        : undefined,
    },
    stop,
  );
}

/**
 * One streamed model call (DESIGN §7.2–7.3): the deltas to a listener as they come, the
 * response to the caller, and the streaming time limits (`timeouts.firstChunkMs`,
 * `timeouts.chunkIdleMs`). The attempt limit, the run's deadline and the journal are the caller's.
 */
import { ModelStreamError } from "../models/errors.ts";
import type { GenerateRequest, Model, ModelResponse, ModelStreamPart } from "../models/types.ts";

/**
 * A part of a streamed call other than its response: what a listener sees live.
 *
 * @example
 * const onPart = (part: ModelStreamDelta) => part.type === "text-delta" && process.stdout.write(part.delta);
 */
export type ModelStreamDelta = Exclude<ModelStreamPart, { readonly type: "response" }>;

/**
 * Limits and a listener for `streamModelCall`.
 *
 * @example
 * const options: StreamModelCallOptions = { firstChunkMs: 20_000, chunkIdleMs: 10_000, what: frameId };
 */
export interface StreamModelCallOptions {
  /** The call fails (retryable) when no part has come this many ms after it started. */
  readonly firstChunkMs?: number;
  /** The call fails (retryable) when no part has come this many ms after the one before. */
  readonly chunkIdleMs?: number;
  /** Each delta, in order, as it comes (not the response). Must not throw: a throw fails the call. */
  readonly onPart?: (part: ModelStreamDelta) => void;
  /** Names the call in error messages, e.g. its frame id. Default: "the model call". */
  readonly what?: string;
}

/**
 * Calls `model` once and returns its response: through `model.stream` when it has one, passing
 * each delta to `onPart`, else through `model.generate` (no deltas, no chunk limits).
 *
 * When no part comes within `firstChunkMs` of the start, or within `chunkIdleMs` of the part
 * before, the request's signal is aborted (so the model's HTTP call stops), the stream is closed,
 * and the call throws `ModelStreamError` `firstChunkTimeout` / `chunkIdleTimeout`, which the
 * failure policy retries. A stream that ends without its `response` part throws
 * `ModelStreamError` `incompleteStream` (retryable). When `request.signal` aborts, the call
 * throws its reason at once, even if the model ignores the signal. Whatever the model throws is
 * passed on as it is, for the failure policy to read.
 *
 * @example
 * ```ts
 * const response = await streamModelCall(model, { messages, tools, signal }, {
 *   firstChunkMs: 20_000,
 *   chunkIdleMs: 10_000,
 *   onPart: (part) => part.type === "text-delta" && process.stdout.write(part.delta),
 * });
 * ```
 */
export async function streamModelCall(
  model: Model,
  request: GenerateRequest,
  options: StreamModelCallOptions = {},
): Promise<ModelResponse> {
  if (typeof model.stream !== "function") return model.generate(request);
  const { firstChunkMs, chunkIdleMs, onPart, what = "the model call" } = options;
  request.signal.throwIfAborted();
  const limit = new AbortController();
  const signal = AbortSignal.any([request.signal, limit.signal]);
  const iterator = model.stream({ ...request, signal })[Symbol.asyncIterator]();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(request.signal.reason);
    request.signal.addEventListener("abort", onAbort, { once: true });
  });
  aborted.catch(() => {}); // raced below; never awaited alone
  let settled = false; // the iterator ended by itself: nothing to close
  let first = true;
  try {
    for (;;) {
      const ms = first ? firstChunkMs : chunkIdleMs;
      const pending = iterator.next();
      pending.catch(() => {}); // left behind after a limit or an abort: its late failure is nobody's
      const raced: Promise<IteratorResult<ModelStreamPart> | "timeout">[] = [pending, aborted];
      let timer: NodeJS.Timeout | undefined;
      if (ms !== undefined) raced.push(new Promise((resolve) => (timer = setTimeout(resolve, ms, "timeout"))));
      let next: IteratorResult<ModelStreamPart> | "timeout";
      try {
        next = await Promise.race(raced);
      } catch (error) {
        if (!request.signal.aborted) settled = true; // the model's own failure ended its stream
        throw error;
      } finally {
        clearTimeout(timer);
      }
      if (next === "timeout") {
        const error = first
          ? new ModelStreamError(
              "firstChunkTimeout",
              `${what}: the model sent nothing within ${ms} ms (timeouts.firstChunkMs); the call was aborted and is retried as the model's retry policy says`,
            )
          : new ModelStreamError(
              "chunkIdleTimeout",
              `${what}: the model's stream stalled for ${ms} ms (timeouts.chunkIdleMs); the call was aborted and is retried as the model's retry policy says`,
            );
        limit.abort(error);
        throw error;
      }
      first = false;
      if (next.done) {
        settled = true;
        throw new ModelStreamError(
          "incompleteStream",
          `${what}: the model's stream ended without its response part; a Model.stream must end with { type: "response", response }`,
        );
      }
      const part = next.value;
      if (part.type === "response") return part.response;
      onPart?.(part);
    }
  } finally {
    if (onAbort) request.signal.removeEventListener("abort", onAbort);
    // Stopped before the stream's end (the response came, a limit, an abort, a listener's throw): close it.
    if (!settled) iterator.return?.()?.then(undefined, () => {});
  }
}

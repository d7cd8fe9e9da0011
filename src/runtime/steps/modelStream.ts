/**
 * One model call, by Loom's one streaming rule: streamed whenever the model can
 * (`Model.stream`), whoever watches, else `generate`. The deltas go to a listener as they come,
 * the response to the caller; the streaming time limits (`timeouts.firstChunkMs`,
 * `timeouts.chunkIdleMs`) are enforced here. The attempt limit, the run's deadline and the
 * journal are the caller's.
 */
import { isInvalidToolInput } from "../../events/invalidInput.ts";
import { isModelCapabilityError, ModelCapabilityError, ModelStreamError } from "../../models/errors.ts";
import type { GenerateRequest, Model, ModelResponse, ModelStreamPart } from "../../models/types.ts";
import type { StepStop } from "../base/runStop.ts";

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
  /** The run making the call, named by a `ModelCapabilityError` (and set on it). */
  readonly runId?: string;
  /** The call's step (`<loop>#turn:<i>:model`), named by a `ModelCapabilityError` (and set on it). */
  readonly stepId?: string;
}

/** Models whose `stream` said it is not implemented: later calls go straight to `generate`. */
const cannotStream = new WeakMap<Model, ModelCapabilityError>();

/**
 * Calls `model` once and returns its response, by Loom's one rule: through `model.stream` when it
 * has one, passing each delta to `onPart`, else through `model.generate`. A `stream` that throws
 * `ModelCapabilityError` before its first part (an AI SDK model whose `doStream` is not
 * implemented) is answered by `generate` instead, and later calls of that model object go
 * straight to `generate`. A call `generate` answers gives `onPart` the response as one delta per
 * text and per tool call's input (its whole JSON text), as a model streaming it in one chunk
 * would, so a listener's text deltas always concatenate to the content. When neither method
 * works, the call throws `ModelCapabilityError` naming the missing methods, `runId` and `stepId`.
 *
 * When no part comes within `firstChunkMs` of the start, or within `chunkIdleMs` of the part
 * before, the request's signal is aborted (so the model's HTTP call stops), the stream is closed,
 * and the call throws `ModelStreamError` `firstChunkTimeout` / `chunkIdleTimeout`, which the
 * failure policy retries (a call `generate` answers has no chunks, so no chunk limits). A stream
 * that ends without its `response` part throws `ModelStreamError` `incompleteStream`
 * (retryable). When `request.signal` aborts, a streamed call throws its reason at once, even if
 * the model ignores the signal. Whatever the model throws is passed on as it is, for the failure
 * policy to read.
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
export function streamModelCall(
  model: Model,
  request: GenerateRequest,
  options: StreamModelCallOptions = {},
): Promise<ModelResponse> {
  return callModel(model, request, options, undefined);
}

/**
 * `streamModelCall` for a durable step: `stop` is the step's, whose abort `withLimits` already
 * races, so no race against the signal is made here, and the request's signal (made when read) is
 * read only by the model or a chunk limit. Reading stops at the first part after `stop` aborts.
 *
 * @example
 * const response = await callModel(model, request, { runId, stepId: frameId, onPart }, stop);
 */
export async function callModel(
  model: Model,
  request: GenerateRequest,
  options: StreamModelCallOptions,
  stop: StepStop | undefined,
): Promise<ModelResponse> {
  let streamMissing = typeof model.stream === "function" ? cannotStream.get(model) : undefined;
  if (typeof model.stream === "function" && streamMissing === undefined) {
    const streamed = await readStream(model, model.stream, request, options, stop);
    if (!isModelCapabilityError(streamed)) return streamed;
    streamMissing = streamed;
    cannotStream.set(model, streamed);
  }
  const generate = model.generate;
  let response: ModelResponse;
  try {
    if (typeof generate !== "function") throw new ModelCapabilityError(["generate"], "it has no generate method");
    response = await generate.call(model, request);
  } catch (error) {
    if (!isModelCapabilityError(error)) throw error;
    throw neitherWorks(streamMissing, error, options);
  }
  if (options.onPart !== undefined) for (const part of wholeDeltas(response)) options.onPart(part);
  return response;
}

/**
 * Reads one streamed call under its limits: its response, or the `ModelCapabilityError` it
 * threw before its first part (the model cannot stream: the caller asks `generate`). Without a
 * `stop`, the request's signal is raced, so an abort ends the call at once.
 */
async function readStream(
  model: Model,
  stream: NonNullable<Model["stream"]>,
  request: GenerateRequest,
  options: StreamModelCallOptions,
  stop: StepStop | undefined,
): Promise<ModelResponse | ModelCapabilityError> {
  const { firstChunkMs, chunkIdleMs, onPart } = options;
  if (stop === undefined) request.signal.throwIfAborted();
  else if (stop.aborted) throw stop.reason;
  // A chunk limit aborts the model's call with a signal of its own, which the request's aborts too.
  // (Not AbortSignal.any: on Node 20 it cost a call about a hundred µs.)
  let limit: AbortController | undefined;
  let unlink: (() => void) | undefined;
  let asked = request;
  if (firstChunkMs !== undefined || chunkIdleMs !== undefined) {
    const own = new AbortController();
    const source = request.signal;
    const forward = () => own.abort(source.reason);
    source.addEventListener("abort", forward, { once: true });
    unlink = () => source.removeEventListener("abort", forward);
    limit = own;
    asked = { messages: request.messages, tools: request.tools, signal: own.signal };
  }
  let iterator: AsyncIterator<ModelStreamPart>;
  try {
    iterator = stream.call(model, asked)[Symbol.asyncIterator]();
  } catch (error) {
    unlink?.();
    if (isModelCapabilityError(error)) return error;
    throw error;
  }
  let onAbort: (() => void) | undefined;
  let abortion: Promise<never> | undefined;
  if (stop === undefined) {
    abortion = new Promise<never>((_, reject) => {
      onAbort = () => reject(request.signal.reason);
      request.signal.addEventListener("abort", onAbort, { once: true });
    });
    abortion.catch(() => {}); // raced below; never awaited alone
  }
  let settled = false; // the iterator ended by itself: nothing to close
  let first = true;
  try {
    for (;;) {
      const ms = first ? firstChunkMs : chunkIdleMs;
      const pending = iterator.next();
      let timer: NodeJS.Timeout | undefined;
      let next: IteratorResult<ModelStreamPart> | "timeout";
      try {
        if (ms === undefined && abortion === undefined) next = await pending;
        else {
          pending.catch(() => {}); // left behind after a limit or an abort: its late failure is nobody's
          const raced: Promise<IteratorResult<ModelStreamPart> | "timeout">[] = [pending];
          if (abortion !== undefined) raced.push(abortion);
          if (ms !== undefined) raced.push(new Promise((resolve) => (timer = setTimeout(resolve, ms, "timeout"))));
          next = await Promise.race(raced);
        }
      } catch (error) {
        if (!(stop === undefined ? request.signal.aborted : stop.aborted)) settled = true; // the model's own failure ended its stream
        if (first && settled && isModelCapabilityError(error)) return error;
        throw error;
      } finally {
        clearTimeout(timer);
      }
      if (stop?.aborted) throw stop.reason; // the step is over (withLimits told it): read no further
      if (next === "timeout") {
        const what = options.what ?? describe(options); // named only when it fails: not a string a call
        const error = first
          ? new ModelStreamError(
              "firstChunkTimeout",
              `${what}: the model sent nothing within ${ms} ms (timeouts.firstChunkMs); the call was aborted and is retried as the model's retry policy says`,
            )
          : new ModelStreamError(
              "chunkIdleTimeout",
              `${what}: the model's stream stalled for ${ms} ms (timeouts.chunkIdleMs); the call was aborted and is retried as the model's retry policy says`,
            );
        limit?.abort(error);
        throw error;
      }
      first = false;
      if (next.done) {
        settled = true;
        throw new ModelStreamError(
          "incompleteStream",
          `${options.what ?? describe(options)}: the model's stream ended without its response part; a Model.stream must end with { type: "response", response }`,
        );
      }
      const part = next.value;
      if (part.type === "response") return part.response;
      onPart?.(part);
    }
  } finally {
    if (onAbort) request.signal.removeEventListener("abort", onAbort);
    unlink?.();
    // Stopped before the stream's end (the response came, a limit, an abort, a listener's throw): close it.
    if (!settled) iterator.return?.()?.then(undefined, () => {});
  }
}

/** "run r-1, model call m#turn:0:model", or what the caller named the call. */
function describe({ what, runId, stepId }: StreamModelCallOptions): string {
  const call = what ?? (stepId === undefined ? "the model call" : `model call ${stepId}`);
  return runId === undefined ? call : `run ${runId}, ${call}`;
}

/** The error of a call neither method could answer: what each said, the run, the step and the fix. */
function neitherWorks(
  streamMissing: ModelCapabilityError | undefined,
  generateMissing: ModelCapabilityError,
  options: StreamModelCallOptions,
): ModelCapabilityError {
  const missing = [...(streamMissing?.missing ?? ["stream"]), ...generateMissing.missing];
  const streams = streamMissing === undefined ? "it has no stream method" : streamMissing.message;
  return new ModelCapabilityError(
    missing,
    `${describe(options)}: the model can neither stream nor generate (${streams}; ${generateMissing.message}). ` +
      "Give it a working stream or generate (an AI SDK model: doStream or doGenerate; a MockLanguageModelV3: pass doStream or doGenerate).",
    { cause: generateMissing, runId: options.runId, stepId: options.stepId },
  );
}

/** A response `generate` gave, as the deltas of a model that streamed it in one chunk. */
function wholeDeltas(response: ModelResponse): ModelStreamDelta[] {
  const parts: ModelStreamDelta[] = [];
  if (response.content) parts.push({ type: "text-delta", delta: response.content });
  for (const call of response.toolCalls ?? []) {
    const text = isInvalidToolInput(call.input) ? call.input.__loomInvalidInput : JSON.stringify(call.input);
    if (text) parts.push({ type: "tool-input-delta", toolCallId: call.id, toolName: call.name, delta: text });
  }
  return parts;
}

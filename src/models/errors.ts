import { LoomError } from "../core/errors.ts";

/** What a model or tool adapter could not take. */
export type ModelAdapterErrorCode =
  /** Not a model the adapter knows (wrong `specificationVersion`, no `doGenerate`, a model id string…). */
  | "unsupportedModel"
  /** The model answered with something that is not a `doGenerate` result. */
  | "invalidModelResponse"
  /** A tool Loom cannot run (provider-executed, or without `execute`). */
  | "unsupportedTool"
  /** An input schema Loom can neither turn into JSON Schema nor validate with. */
  | "unsupportedSchema";

/** A model or tool handed to an adapter (`fromAiSdk`, `fromAiSdkTool`) that it cannot use. */
export class ModelAdapterError extends LoomError {
  declare readonly code: ModelAdapterErrorCode;
  constructor(code: ModelAdapterErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** True when `e` is a `ModelAdapterError`. */
export const isModelAdapterError = (e: unknown): e is ModelAdapterError => e instanceof ModelAdapterError;

/**
 * Why a streamed model call failed (`Model.stream`, `streamModelCall`).
 *
 * @example
 * const stalled = (e: ModelStreamError) => e.code === "firstChunkTimeout" || e.code === "chunkIdleTimeout";
 */
export type ModelStreamErrorCode =
  /** No part came within `timeouts.firstChunkMs` of the call. */
  | "firstChunkTimeout"
  /** No part came within `timeouts.chunkIdleMs` of the one before. */
  | "chunkIdleTimeout"
  /** The stream ended without its `response` part (`Model.stream`) or its `finish` part (AI SDK). */
  | "incompleteStream"
  /** The AI SDK stream sent an `error` part whose error is not an `Error`. */
  | "streamError";

/**
 * A streamed model call that stalled, was cut, or reported an error mid-stream. Always
 * retryable (`isRetryable: true`): the failure policy journals the attempt as failed and tries
 * again as the model's retry policy says.
 *
 * @example
 * ```ts
 * try {
 *   await streamModelCall(model, request, { firstChunkMs: 10_000 });
 * } catch (e) {
 *   if (isModelStreamError(e) && e.code === "firstChunkTimeout") console.warn(e.message);
 * }
 * ```
 */
export class ModelStreamError extends LoomError {
  declare readonly code: ModelStreamErrorCode;
  /** Read by the failure policy (`attemptError`), as an AI SDK `APICallError`'s is. */
  readonly isRetryable = true;
  constructor(code: ModelStreamErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/**
 * True when `e` is a `ModelStreamError`.
 *
 * @example
 * ```ts
 * if (isModelStreamError(e)) console.warn(`stream failed (${e.code}): ${e.message}`);
 * ```
 */
export const isModelStreamError = (e: unknown): e is ModelStreamError => e instanceof ModelStreamError;

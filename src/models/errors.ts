import { codesOf, errorGuard, LoomError } from "../core/errors.ts";

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
export const isModelAdapterError = errorGuard(ModelAdapterError, {
  codes: codesOf<ModelAdapterErrorCode>({
    unsupportedModel: true,
    invalidModelResponse: true,
    unsupportedTool: true,
    unsupportedSchema: true,
  }),
});

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
export const isModelStreamError = errorGuard(ModelStreamError, {
  codes: codesOf<ModelStreamErrorCode>({
    firstChunkTimeout: true,
    chunkIdleTimeout: true,
    incompleteStream: true,
    streamError: true,
  }),
});

/**
 * A model that cannot answer a call the way Loom asks: it has no working `stream` and no working
 * `generate` (for an AI SDK model, neither `doStream` nor `doGenerate` is given or implemented),
 * or an adapter's method that is missing or throws "Not implemented". `missing` names the methods.
 *
 * Thrown by one method (an adapter's `stream` or `generate`, with no run), it tells the loop to
 * use the other: a `stream` that throws it before its first part is answered by `generate`
 * instead. When neither works, the run's model call fails with it, naming the run and the step
 * (`runId`, `stepId`): never retried (`isRetryable: false`), the run is interrupted (`model-error`)
 * and its cause's `name` is `"ModelCapabilityError"`.
 *
 * @example
 * ```ts
 * const onlyStreams: Model = {
 *   generate: async () => {
 *     throw new ModelCapabilityError(["generate"], "my-model only streams");
 *   },
 *   stream: (request) => myStream(request),
 * };
 * ```
 */
export class ModelCapabilityError extends LoomError {
  declare readonly code: "modelMethodMissing";
  /** Read by the failure policy: asking again cannot make a method appear. */
  readonly isRetryable = false;
  /** The methods missing or not implemented (`stream`, `generate`, `doStream`, `doGenerate`). */
  readonly missing: readonly string[];
  /** The run whose model call could not be made, when a run made it. */
  readonly runId: string | undefined;
  /** The model step (`<loop>#turn:<i>:model`), when a run made the call. */
  readonly stepId: string | undefined;
  constructor(
    missing: readonly string[],
    message: string,
    options: { readonly cause?: unknown; readonly runId?: string; readonly stepId?: string } = {},
  ) {
    super("modelMethodMissing", message, options.cause === undefined ? undefined : { cause: options.cause });
    this.missing = missing;
    this.runId = options.runId;
    this.stepId = options.stepId;
  }
}

/**
 * True when `e` is a `ModelCapabilityError`.
 *
 * @example
 * ```ts
 * if (isModelCapabilityError(e)) console.error(`the model lacks ${e.missing.join(" and ")}`);
 * ```
 */
export const isModelCapabilityError = errorGuard(ModelCapabilityError, { codes: ["modelMethodMissing"] });

/**
 * Whether a model method's throw says the method is not there: an error named `NotImplementedError`
 * or whose whole message is "Not implemented" (the AI SDK's `MockLanguageModelV3` throws
 * `new Error("Not implemented")` from a `doGenerate` or `doStream` it was not given). An error with
 * an HTTP status (a provider's 501 is an answer) is not.
 */
export function isNotImplemented(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { statusCode, status } = error as { statusCode?: unknown; status?: unknown };
  if (statusCode !== undefined || status !== undefined) return false;
  return /^NotImplemented(Error)?$/i.test(error.name) || /^\s*not implemented\.?\s*$/i.test(error.message);
}

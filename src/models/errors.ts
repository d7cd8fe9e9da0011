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

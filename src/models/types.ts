import type { Message, ModelResponse } from "../events/types.ts";

export type { Message, ModelResponse, ToolCall } from "../events/types.ts";

/** A tool as the model is told of it. */
export interface ToolDescriptor {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the input, when the tool has one. */
  readonly inputSchema?: unknown;
}

export interface GenerateRequest {
  readonly messages: readonly Message[];
  readonly tools: readonly ToolDescriptor[];
  readonly signal: AbortSignal;
}

/**
 * Loom's Model SPI: one call, one response. No tool calls means the answer is final.
 * Adapters: `scriptedModel` (tests, demo), `fromAiSdk` (any AI SDK LanguageModel).
 */
export interface Model {
  generate(request: GenerateRequest): Promise<ModelResponse>;
}

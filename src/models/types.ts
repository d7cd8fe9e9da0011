import type { Message, ModelResponse } from "../events/types.ts";

export type { Message, ModelResponse, ToolCall } from "../events/types.ts";

/** A tool as the model is told of it. */
export interface ToolDescriptor {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the input, when the tool has one. */
  readonly inputSchema?: unknown;
}

/** One model call: the conversation so far and the tools the model may call. */
export interface GenerateRequest {
  /** The conversation: the input, then each turn's response and tool results. */
  readonly messages: readonly Message[];
  /** The tools the model may call (the same list on every call of a run). */
  readonly tools: readonly ToolDescriptor[];
  /** Aborted when the run is: pass it to your HTTP client. */
  readonly signal: AbortSignal;
}

/**
 * Loom's Model SPI: one call, one response. No tool calls means the answer is final.
 * Adapters: `scriptedModel` (tests, demo), `fromAiSdk` (any AI SDK LanguageModel).
 */
export interface Model {
  /** Answers one call: content, tool calls, or both. */
  generate(request: GenerateRequest): Promise<ModelResponse>;
}

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

/**
 * One part of a streamed model call (`Model.stream`): deltas as they arrive, then the whole
 * response, exactly once and last. The response is what the journal records, so it must equal
 * what `generate` would have returned for the same call.
 */
export type ModelStreamPart =
  | { readonly type: "text-delta"; readonly delta: string }
  | { readonly type: "reasoning-delta"; readonly delta: string }
  | {
      readonly type: "tool-input-delta";
      readonly toolCallId: string;
      readonly toolName: string;
      readonly delta: string;
    }
  | { readonly type: "response"; readonly response: ModelResponse };

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
 *
 * The loop's one rule: it calls `stream` whenever the model has one, whoever watches the run
 * (nobody, `onEvent`, `loop.stream`, telemetry, a worker), and `generate` otherwise. A method the
 * model cannot serve throws `ModelCapabilityError`: a `stream` that throws it before its first
 * part is answered by `generate` instead (and the model is not asked to stream again), and a
 * call neither answers fails the run's model call with it.
 */
export interface Model {
  /** The model's id (`gpt-4o`, …), when known: telemetry reports it as `gen_ai.request.model`. */
  readonly id?: string;
  /**
   * The provider's name (`openai`, `anthropic`, `aws.bedrock`…), when known: telemetry reports it
   * as `gen_ai.provider.name`. `fromAiSdk` sets it from the AI SDK model's `provider`.
   */
  readonly provider?: string;
  /**
   * Answers one call: content, tool calls, or both. The loop calls it only for a model without a
   * working `stream`; a model that only streams may throw `ModelCapabilityError` here.
   */
  generate(request: GenerateRequest): Promise<ModelResponse>;
  /**
   * Optional: answers the same call as it is produced. The contract:
   * - deltas first (`text-delta`, `reasoning-delta`, `tool-input-delta`), in the order the
   *   model produced them; the text deltas concatenate to the response's `content`;
   * - then exactly one `response` part, last: the whole `ModelResponse`, equal to what `generate`
   *   would have returned for the same call. It is what the journal records; deltas are never
   *   journaled, so a consumer may drop them;
   * - a failure is a throw from the iterator (the failure policy reads it as it reads a throw of
   *   `generate`: `isRetryable`, HTTP status…), never a part;
   * - the request's `signal` aborts the call; a consumer that stops early calls the iterator's
   *   `return()`, which must release the connection.
   *
   * The loop uses `stream` whenever a model has it, watched or not (see `streamModelCall`),
   * else `generate`. Throw `ModelCapabilityError` before the first part when this model cannot
   * stream after all: the loop then calls `generate`.
   *
   * @example
   * ```ts
   * for await (const part of model.stream!(request)) {
   *   if (part.type === "text-delta") process.stdout.write(part.delta);
   *   else if (part.type === "response") journal(part.response);
   * }
   * ```
   */
  stream?(request: GenerateRequest): AsyncIterable<ModelStreamPart>;
}

/**
 * One part of a streamed model call (`Model.stream`): deltas as they arrive, then the whole
 * response, exactly once and last. The response is what the journal records, so it must equal
 * what `generate` would have returned for the same call.
 *
 * @example
 * const parts: ModelStreamPart[] = [
 *   { type: "text-delta", delta: "Hel" },
 *   { type: "text-delta", delta: "lo" },
 *   { type: "response", response: { content: "Hello", toolCalls: [] } },
 * ];
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

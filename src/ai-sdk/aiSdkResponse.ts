/**
 * An AI SDK `doGenerate` result (specification v2, v3 or v4) as Loom's `ModelResponse`.
 */

import type { InvalidToolInput } from "../events/invalidInput.ts";
import type { ModelResponse, ToolCall } from "../events/types.ts";
import { ModelAdapterError } from "../models/errors.ts";

/** The part of a `doGenerate` result the adapter reads (the same in v2, v3 and v4). */
export interface AiSdkGenerateResult {
  readonly content: readonly AiSdkContentPart[];
  /** v2: a string; v3, v4: `{ unified, raw }`. */
  readonly finishReason?: unknown;
  /** v2: numbers; v3, v4: `{ total, … }` objects. */
  readonly usage?: { readonly inputTokens?: unknown; readonly outputTokens?: unknown };
}

/** A content part; only `text` and `tool-call` parts are read. */
export type AiSdkContentPart =
  | { readonly type: "text"; readonly text: string }
  | {
      readonly type: "tool-call";
      readonly toolCallId: string;
      readonly toolName: string;
      /** JSON text. */
      readonly input: unknown;
      readonly providerExecuted?: boolean;
    }
  | { readonly type: string };

/**
 * Text parts joined into `content`; tool-call parts into `toolCalls` (their JSON text parsed,
 * malformed text kept as an `InvalidToolInput`); calls the provider executed itself are left
 * out, as are reasoning, files and sources.
 */
export function fromAiSdkResult(result: unknown, modelName: string): ModelResponse {
  if (typeof result !== "object" || result === null || !Array.isArray((result as { content?: unknown }).content)) {
    throw new ModelAdapterError(
      "invalidModelResponse",
      `${modelName}: doGenerate resolved to ${describe(result)}, not a result with a content array. Is the model's specificationVersion right?`,
    );
  }
  const { content, finishReason, usage } = result as AiSdkGenerateResult;
  let text = "";
  const toolCalls: ToolCall[] = [];
  for (const part of content) {
    if (isTextPart(part)) text += part.text;
    else if (isToolCallPart(part) && part.providerExecuted !== true) {
      toolCalls.push({ id: part.toolCallId, name: part.toolName, input: parseToolInput(part.input) });
    }
  }
  const response: { -readonly [K in keyof ModelResponse]: ModelResponse[K] } = { toolCalls };
  if (text !== "") response.content = text;
  const tokens = toUsage(usage);
  if (tokens !== undefined) response.usage = tokens;
  const reason = toFinishReason(finishReason);
  if (reason !== undefined) response.finishReason = reason;
  return response;
}

/** JSON text → value. Empty text is `{}` (providers send it for a call without arguments). */
export function parseToolInput(input: unknown): unknown {
  if (typeof input !== "string") return input; // some v2 providers hand over the parsed object
  if (input.trim() === "") return {};
  try {
    return JSON.parse(input);
  } catch (e) {
    const marker: InvalidToolInput = { __loomInvalidInput: input, error: e instanceof Error ? e.message : String(e) };
    return marker;
  }
}

function toUsage(usage: AiSdkGenerateResult["usage"]): ModelResponse["usage"] {
  if (typeof usage !== "object" || usage === null) return undefined;
  const inputTokens = tokenCount(usage.inputTokens);
  const outputTokens = tokenCount(usage.outputTokens);
  if (inputTokens === undefined && outputTokens === undefined) return undefined;
  return {
    ...(inputTokens === undefined ? {} : { inputTokens }),
    ...(outputTokens === undefined ? {} : { outputTokens }),
  };
}

/** v2 counts are numbers; v3 and v4 counts are objects with a `total`. */
function tokenCount(count: unknown): number | undefined {
  if (typeof count === "number") return Number.isFinite(count) ? count : undefined;
  if (typeof count === "object" && count !== null) return tokenCount((count as { total?: unknown }).total);
  return undefined;
}

/** v2: the string; v3, v4: the unified reason (the provider's raw one is left out). */
function toFinishReason(reason: unknown): string | undefined {
  if (typeof reason === "string") return reason;
  if (typeof reason === "object" && reason !== null) {
    const unified = (reason as { unified?: unknown }).unified;
    if (typeof unified === "string") return unified;
  }
  return undefined;
}

function isTextPart(part: AiSdkContentPart): part is { type: "text"; text: string } {
  return part.type === "text" && typeof (part as { text?: unknown }).text === "string";
}

function isToolCallPart(part: AiSdkContentPart): part is Extract<AiSdkContentPart, { type: "tool-call" }> {
  const p = part as { type: string; toolCallId?: unknown; toolName?: unknown };
  return p.type === "tool-call" && typeof p.toolCallId === "string" && typeof p.toolName === "string";
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value !== "object") return typeof value;
  return `an object with keys [${Object.keys(value).join(", ")}]`;
}

/**
 * Loom's conversation and tools, in the shape an AI SDK LanguageModel (specification v2, v3 or
 * v4) takes them. The types are written out structurally so that nothing here needs
 * `@ai-sdk/provider` installed; the tests check them against its types.
 */

import { isInvalidToolInput } from "../events/invalidInput.ts";
import type { Message } from "../events/types.ts";
import type { ToolDescriptor } from "../models/types.ts";

/** The LanguageModel specifications the adapter speaks. */
export type AiSdkSpecificationVersion = "v2" | "v3" | "v4";

/** A JSON value as the prompt carries it. */
export type AiSdkJsonValue = null | string | number | boolean | AiSdkJsonValue[] | { [key: string]: AiSdkJsonValue };

export type AiSdkToolResultOutput =
  | { type: "json"; value: AiSdkJsonValue }
  | { type: "error-text"; value: string }
  | { type: "error-json"; value: AiSdkJsonValue }
  /** v3 and later only. */
  | { type: "execution-denied"; reason?: string };

export interface AiSdkTextPart {
  type: "text";
  text: string;
}

export interface AiSdkToolCallPart {
  type: "tool-call";
  toolCallId: string;
  toolName: string;
  /** A JSON object (not JSON text, unlike the tool calls of a response). */
  input: unknown;
}

export interface AiSdkToolResultPart {
  type: "tool-result";
  toolCallId: string;
  toolName: string;
  output: AiSdkToolResultOutput;
}

export type AiSdkPromptMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: AiSdkTextPart[] }
  | { role: "assistant"; content: Array<AiSdkTextPart | AiSdkToolCallPart> }
  | { role: "tool"; content: AiSdkToolResultPart[] };

export interface AiSdkFunctionTool {
  type: "function";
  name: string;
  description?: string;
  inputSchema: unknown;
}

/** What the loop feeds the model for a declined approval: `{ error: "approval-declined", … }`. */
export function isDeclinedApproval(output: unknown): output is { readonly error: "approval-declined" } {
  return typeof output === "object" && output !== null && (output as { error?: unknown }).error === "approval-declined";
}

/**
 * The prompt for Loom's conversation. Consecutive tool messages become one tool message (one
 * part per result), as providers expect the results of one step together; an assistant
 * message with neither text nor tool calls is left out.
 */
export function toAiSdkPrompt(messages: readonly Message[], version: AiSdkSpecificationVersion): AiSdkPromptMessage[] {
  const prompt: AiSdkPromptMessage[] = [];
  for (const message of messages) {
    switch (message.role) {
      case "system":
        prompt.push({ role: "system", content: message.content });
        break;
      case "user":
        prompt.push({ role: "user", content: [{ type: "text", text: message.content }] });
        break;
      case "assistant": {
        const content: Array<AiSdkTextPart | AiSdkToolCallPart> = [];
        if (message.content) content.push({ type: "text", text: message.content });
        for (const call of message.toolCalls) {
          content.push({
            type: "tool-call",
            toolCallId: call.id,
            toolName: call.name,
            input: promptToolInput(call.input),
          });
        }
        if (content.length > 0) prompt.push({ role: "assistant", content });
        break;
      }
      case "tool": {
        const part: AiSdkToolResultPart = {
          type: "tool-result",
          toolCallId: message.toolCallId,
          toolName: message.toolName,
          output: toolResultOutput(message.output, message.isError, version),
        };
        const last = prompt.at(-1);
        if (last?.role === "tool") last.content.push(part);
        else prompt.push({ role: "tool", content: [part] });
        break;
      }
      default: {
        const never: never = message;
        throw new TypeError(`toAiSdkPrompt: unknown message role in ${JSON.stringify(never)}`);
      }
    }
  }
  return prompt;
}

/**
 * What a tool result is fed as: a declined approval → `execution-denied` (v3+; v2 has no such
 * output, so `error-json`); a failure or refusal (`isError`) → `error-text` for a string,
 * `error-json` otherwise; anything else → `json`.
 */
export function toolResultOutput(
  output: unknown,
  isError: boolean,
  version: AiSdkSpecificationVersion,
): AiSdkToolResultOutput {
  if (isDeclinedApproval(output) && version !== "v2") {
    const reason = declineReason(output);
    return reason === undefined ? { type: "execution-denied" } : { type: "execution-denied", reason };
  }
  if (isError || isDeclinedApproval(output)) {
    return typeof output === "string"
      ? { type: "error-text", value: output }
      : { type: "error-json", value: toJson(output) };
  }
  return { type: "json", value: toJson(output) };
}

/** The function tools for the model; a tool without a schema takes any object. */
export async function toAiSdkTools(tools: readonly ToolDescriptor[]): Promise<AiSdkFunctionTool[]> {
  return Promise.all(
    tools.map(async (tool) => ({
      type: "function" as const,
      name: tool.name,
      description: tool.description,
      // A tool adapted from the AI SDK may hold a schema that is still being computed (a PromiseLike).
      inputSchema: (await tool.inputSchema) ?? { type: "object" },
    })),
  );
}

function declineReason(output: object): string | undefined {
  const { reason, message } = output as { reason?: unknown; message?: unknown };
  if (typeof reason === "string") return reason;
  if (typeof message === "string") return message;
  return undefined;
}

/** An input that was not JSON (see `isInvalidToolInput`) is replayed as `{}`, as the AI SDK does. */
function promptToolInput(input: unknown): unknown {
  return isInvalidToolInput(input) || input === undefined ? {} : input;
}

/** The JSON form of a value (undefined and values without one become null; never throws). */
function toJson(value: unknown): AiSdkJsonValue {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? null : (JSON.parse(text) as AiSdkJsonValue);
  } catch {
    return String(value);
  }
}

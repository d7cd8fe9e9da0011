/**
 * An AI SDK `doStream` result (specification v2, v3 or v4) as Loom's `ModelStreamPart`s: the
 * deltas as they come, then the response, assembled into the shape of a `doGenerate` result and
 * mapped by the same `fromAiSdkResult`, so a streamed call journals what a generated one would.
 */

import { ModelAdapterError, ModelStreamError } from "../models/errors.ts";
import type { ModelStreamPart } from "../models/types.ts";
import { type AiSdkContentPart, fromAiSdkResult } from "./aiSdkResponse.ts";

/**
 * The stream parts the adapter reads (the same in v2, v3 and v4, but for v4's `inputEncoding`);
 * the others (v4's `ping`, `custom`, `reasoning-file`, `tool-approval-request` among them) are skipped.
 */
type AiSdkStreamPart =
  | { readonly type: "text-start" | "text-end" | "reasoning-start" | "reasoning-end"; readonly id: string }
  | { readonly type: "text-delta" | "reasoning-delta"; readonly id: string; readonly delta: string }
  | {
      readonly type: "tool-input-start";
      readonly id: string;
      readonly toolName: string;
      readonly providerExecuted?: boolean;
      /** v4: `text` when the deltas are the raw text of a string input, not JSON (default `json`). */
      readonly inputEncoding?: "json" | "text";
    }
  | { readonly type: "tool-input-delta" | "tool-input-end"; readonly id: string; readonly delta?: string }
  | (AiSdkContentPart & { readonly type: "tool-call" })
  | { readonly type: "finish"; readonly finishReason?: unknown; readonly usage?: unknown }
  | { readonly type: "error"; readonly error: unknown };

/**
 * Calls `start` (`doStream`) when first read, and reads the stream it resolves to: yields text, reasoning and tool-input
 * deltas, then one `response` part. An `error` part, a stream that ends without `finish`, or
 * (v4) a `finish` whose reason is `interrupted`, throws (see `ModelStreamError`); an error the stream itself throws is passed on as it is, so
 * the failure policy reads its `isRetryable` and status. Stopping early cancels the stream.
 */
export async function* aiSdkStreamParts(
  start: () => PromiseLike<unknown>,
  modelName: string,
): AsyncGenerator<ModelStreamPart> {
  const result = await start();
  const stream = (result as { stream?: unknown } | null)?.stream;
  if (typeof (stream as ReadableStream | undefined)?.getReader !== "function") {
    throw new ModelAdapterError(
      "invalidModelResponse",
      `${modelName}: doStream resolved to ${typeof result === "object" && result !== null ? "an object without a readable stream" : String(result)}. Is the model's specificationVersion right?`,
    );
  }
  const reader = (stream as ReadableStream<unknown>).getReader();
  const content: AiSdkContentPart[] = [];
  const texts = new Map<string, { type: "text"; text: string }>();
  const toolInputs = new Map<string, ToolInput>();
  let finish: { finishReason?: unknown; usage?: unknown } | undefined;
  let done = false;
  // A text block keeps the place of its first part, as doGenerate's content does.
  const textBlock = (id: string) => {
    let block = texts.get(id);
    if (block === undefined) {
      block = { type: "text", text: "" };
      texts.set(id, block);
      content.push(block);
    }
    return block;
  };
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) {
        done = true;
        break;
      }
      const part = next.value as AiSdkStreamPart;
      switch (part?.type) {
        case "text-start":
          textBlock(part.id);
          break;
        case "text-delta":
          textBlock(part.id).text += part.delta;
          if (part.delta !== "") yield { type: "text-delta", delta: part.delta };
          break;
        case "reasoning-delta":
          if (part.delta !== "") yield { type: "reasoning-delta", delta: part.delta };
          break;
        case "tool-input-start":
          toolInputs.set(part.id, {
            toolName: part.toolName,
            providerExecuted: part.providerExecuted === true,
            text: part.inputEncoding === "text" ? { opened: false, held: "", closed: false } : undefined,
          });
          break;
        case "tool-input-delta":
        case "tool-input-end": {
          const call = toolInputs.get(part.id);
          // A call the provider runs itself is not Loom's to show: the response leaves it out.
          if (call === undefined || call.providerExecuted) break;
          const delta = inputDelta(call, part.type === "tool-input-end" ? undefined : (part.delta ?? ""));
          if (delta !== "") yield { type: "tool-input-delta", toolCallId: part.id, toolName: call.toolName, delta };
          break;
        }
        case "tool-call": {
          const id = (part as { toolCallId?: unknown }).toolCallId;
          const call = typeof id === "string" ? toolInputs.get(id) : undefined;
          if (typeof id === "string" && call !== undefined && !call.providerExecuted) {
            const delta = inputDelta(call, undefined); // a text input ends here when no tool-input-end came
            if (delta !== "") yield { type: "tool-input-delta", toolCallId: id, toolName: call.toolName, delta };
          }
          content.push(part);
          break;
        }
        case "finish":
          finish = part;
          break;
        case "error":
          throw streamError(part.error, modelName);
        default:
          break; // stream-start, response-metadata, sources, files, raw, ping, *-start/-end: nothing Loom keeps
      }
    }
  } finally {
    if (!done) reader.cancel().catch(() => {}); // stopped early or failed: release the connection
    reader.releaseLock();
  }
  if (finish === undefined) {
    throw new ModelStreamError(
      "incompleteStream",
      `${modelName}: the stream ended without a finish part (the connection was likely cut); the attempt is retried as the model's retry policy says.`,
    );
  }
  if ((finish.finishReason as { unified?: unknown } | null)?.unified === "interrupted") {
    // v4: the provider saw the stream end without its completion signal; what came may be cut short.
    throw new ModelStreamError(
      "incompleteStream",
      `${modelName}: the provider reports the stream interrupted (finish reason "interrupted": it ended without a completion signal, so the answer may be cut short); the attempt is retried as the model's retry policy says.`,
    );
  }
  const response = fromAiSdkResult({ content, finishReason: finish.finishReason, usage: finish.usage }, modelName);
  yield { type: "response", response };
}

/** A tool call whose input is streaming: its tool, and for a v4 `text` input what was sent of it. */
interface ToolInput {
  readonly toolName: string;
  readonly providerExecuted: boolean;
  /** `opened`: the opening quote was sent; `held`: a high surrogate waiting for its pair; `closed`: all sent. */
  readonly text: { opened: boolean; held: string; closed: boolean } | undefined;
}

/**
 * The delta Loom gives for a provider's tool-input delta (`undefined`: the input ended). A `json`
 * input's deltas are passed as they are. A v4 `text` input's deltas are the raw string, while the
 * call's input is that string JSON-encoded: they are sent as the JSON string's text, so every
 * call's deltas concatenate to its input's JSON text (`"`, the escaped text, then `"` at its end).
 */
function inputDelta(call: ToolInput, delta: string | undefined): string {
  const text = call.text;
  if (text === undefined) return delta ?? "";
  if (text.closed) return "";
  let raw = text.held + (delta ?? "");
  text.held = "";
  const last = raw.charCodeAt(raw.length - 1);
  if (delta !== undefined && last >= 0xd800 && last <= 0xdbff) {
    text.held = raw.slice(-1); // escaped with its pair, as JSON.stringify escapes the whole text
    raw = raw.slice(0, -1);
  }
  let out = raw === "" ? "" : JSON.stringify(raw).slice(1, -1);
  if (!text.opened && (out !== "" || delta === undefined)) {
    text.opened = true;
    out = `"${out}`;
  }
  if (delta === undefined) {
    text.closed = true;
    out += '"';
  }
  return out;
}

/** An error part's error: thrown as it is when it is an Error (it says whether to retry), else wrapped. */
function streamError(error: unknown, modelName: string): unknown {
  if (error instanceof Error) return error;
  let text: string;
  try {
    text = typeof error === "string" ? error : (JSON.stringify(error) ?? String(error));
  } catch {
    text = String(error);
  }
  return new ModelStreamError("streamError", `${modelName}: the stream reported an error: ${text}`, { cause: error });
}

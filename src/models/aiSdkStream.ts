/**
 * An AI SDK `doStream` result (specification v2, v3 or v4) as Loom's `ModelStreamPart`s: the
 * deltas as they come, then the response, assembled into the shape of a `doGenerate` result and
 * mapped by the same `fromAiSdkResult`, so a streamed call journals what a generated one would.
 */
import { type AiSdkContentPart, fromAiSdkResult } from "./aiSdkResponse.ts";
import { ModelAdapterError, ModelStreamError } from "./errors.ts";
import type { ModelStreamPart } from "./types.ts";

/** The stream parts the adapter reads (the same in v2, v3 and v4); the others are skipped. */
type AiSdkStreamPart =
  | { readonly type: "text-start" | "text-end" | "reasoning-start" | "reasoning-end"; readonly id: string }
  | { readonly type: "text-delta" | "reasoning-delta"; readonly id: string; readonly delta: string }
  | {
      readonly type: "tool-input-start";
      readonly id: string;
      readonly toolName: string;
      readonly providerExecuted?: boolean;
    }
  | { readonly type: "tool-input-delta"; readonly id: string; readonly delta: string }
  | (AiSdkContentPart & { readonly type: "tool-call" })
  | { readonly type: "finish"; readonly finishReason?: unknown; readonly usage?: unknown }
  | { readonly type: "error"; readonly error: unknown };

/**
 * Calls `start` (`doStream`) when first read, and reads the stream it resolves to: yields text, reasoning and tool-input
 * deltas, then one `response` part. An `error` part, or a stream that ends without `finish`,
 * throws (see `ModelStreamError`); an error the stream itself throws is passed on as it is, so
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
  const toolInputs = new Map<string, { readonly toolName: string; readonly providerExecuted: boolean }>();
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
          toolInputs.set(part.id, { toolName: part.toolName, providerExecuted: part.providerExecuted === true });
          break;
        case "tool-input-delta": {
          const call = toolInputs.get(part.id);
          // A call the provider runs itself is not Loom's to show: the response leaves it out.
          if (call !== undefined && !call.providerExecuted && part.delta !== "") {
            yield { type: "tool-input-delta", toolCallId: part.id, toolName: call.toolName, delta: part.delta };
          }
          break;
        }
        case "tool-call":
          content.push(part);
          break;
        case "finish":
          finish = part;
          break;
        case "error":
          throw streamError(part.error, modelName);
        default:
          break; // stream-start, response-metadata, sources, files, raw, *-end: nothing Loom keeps
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
  const response = fromAiSdkResult({ content, finishReason: finish.finishReason, usage: finish.usage }, modelName);
  yield { type: "response", response };
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

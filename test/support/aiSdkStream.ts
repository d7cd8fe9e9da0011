import type { LanguageModelV3GenerateResult, LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { simulateReadableStream } from "ai/test";

/** Cuts `text` at the given offsets (at least one piece, the empty text included). */
export function pieces(text: string, cuts: readonly number[]): string[] {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const out: string[] = [];
  let from = 0;
  for (const to of at) {
    if (to > from) out.push(text.slice(from, to));
    from = Math.max(from, to);
  }
  out.push(text.slice(from));
  return out;
}

/**
 * The v3 stream parts a provider sends for the content of a `doGenerate` result: text and
 * reasoning as start/deltas/end blocks, each tool call's input as deltas then its `tool-call`,
 * then `finish` with the result's usage and finish reason. Deltas are cut at `cuts`.
 */
export function streamPartsOf(
  result: Pick<LanguageModelV3GenerateResult, "content" | "finishReason" | "usage">,
  cuts: readonly number[] = [3, 7],
): LanguageModelV3StreamPart[] {
  const parts: LanguageModelV3StreamPart[] = [{ type: "stream-start", warnings: [] }];
  result.content.forEach((part, i) => {
    if (part.type === "text" || part.type === "reasoning") {
      const id = `p${i}`;
      const kind = part.type;
      parts.push({ type: `${kind}-start`, id });
      for (const delta of pieces(part.text, cuts)) parts.push({ type: `${kind}-delta`, id, delta });
      parts.push({ type: `${kind}-end`, id });
    } else if (part.type === "tool-call") {
      const id = part.toolCallId;
      parts.push({
        type: "tool-input-start",
        id,
        toolName: part.toolName,
        ...(part.providerExecuted ? { providerExecuted: true } : {}),
      });
      for (const delta of pieces(part.input, cuts)) parts.push({ type: "tool-input-delta", id, delta });
      parts.push({ type: "tool-input-end", id });
      parts.push(part);
    }
  });
  parts.push({ type: "finish", finishReason: result.finishReason, usage: result.usage });
  return parts;
}

/**
 * A `doStream` answer for `MockLanguageModelV3` with the same content as a `doGenerate` result,
 * so one script serves both: `new MockLanguageModelV3({ doGenerate: TURNS, doStream: TURNS.map(streamedAs) })`.
 */
export const streamedAs = (result: Pick<LanguageModelV3GenerateResult, "content" | "finishReason" | "usage">) => ({
  stream: simulateReadableStream({ chunks: streamPartsOf(result) }),
});

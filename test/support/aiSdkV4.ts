import { simulateReadableStream } from "ai/test";

/*
 * Specification v4. `LanguageModelV4` is declared by `@ai-sdk/provider` 4.x (4.0.38 at the time of
 * writing), which needs Node ≥ 22: this repository (Node 20, `ai@6` with `@ai-sdk/provider@3`, which
 * declares v2 and v3 only) cannot install it. The types below are written from its declarations:
 * the parts of `LanguageModelV4`, its stream parts and its results that these tests use. What v4
 * adds to a stream: `ping`, `tool-approval-request`, `custom` and `reasoning-file` parts, and
 * `inputEncoding: "text"` on `tool-input-start` (the deltas are the raw text of a string input,
 * whose `tool-call` input is still that string JSON-encoded).
 */
export type V4FinishReason = {
  unified: "stop" | "length" | "content-filter" | "tool-calls" | "error" | "interrupted" | "other";
  raw: string | undefined;
};
export type V4Usage = {
  inputTokens: { total?: number; noCache?: number; cacheRead?: number; cacheWrite?: number };
  outputTokens: { total?: number; text?: number; reasoning?: number };
};
export type V4ToolCall = {
  type: "tool-call";
  toolCallId: string;
  toolName: string;
  input: string;
  providerExecuted?: boolean;
};
export type V4Content =
  | { type: "text"; text: string }
  | { type: "reasoning"; text: string }
  | { type: "custom"; kind: `${string}.${string}` }
  | { type: "reasoning-file"; mediaType: string; data: { type: "data"; data: string } }
  | { type: "tool-approval-request"; approvalId: string; toolCallId: string }
  | V4ToolCall;
export type V4StreamPart =
  | { type: "stream-start"; warnings: unknown[] }
  | { type: "response-metadata"; id?: string; modelId?: string }
  | { type: "text-start" | "text-end" | "reasoning-start" | "reasoning-end"; id: string }
  | { type: "text-delta" | "reasoning-delta"; id: string; delta: string }
  | { type: "tool-input-start"; id: string; toolName: string; inputEncoding?: "json" | "text"; title?: string }
  | { type: "tool-input-delta"; id: string; delta: string }
  | { type: "tool-input-end"; id: string }
  | Exclude<V4Content, { type: "text" | "reasoning" }>
  | { type: "finish"; usage: V4Usage; finishReason: V4FinishReason }
  | { type: "ping" }
  | { type: "raw"; rawValue: unknown }
  | { type: "error"; error: unknown };
export interface V4CallOptions {
  prompt: unknown[];
  tools?: { type: "function"; name: string; description?: string; inputSchema: unknown }[];
  abortSignal?: AbortSignal;
  temperature?: number;
}
export interface LanguageModelV4 {
  readonly specificationVersion: "v4";
  readonly provider: string;
  readonly modelId: string;
  supportedUrls: Record<string, RegExp[]>;
  doGenerate(
    options: V4CallOptions,
  ): PromiseLike<{ content: V4Content[]; finishReason: V4FinishReason; usage: V4Usage; warnings: unknown[] }>;
  doStream(options: V4CallOptions): PromiseLike<{ stream: ReadableStream<V4StreamPart> }>;
}

export const usage = (input: number, output: number): V4Usage => ({
  inputTokens: { total: input, noCache: input },
  outputTokens: { total: output, text: output },
});

/** A v4 model answering each call with the next turn: `doGenerate` as a whole, `doStream` as `parts(turn)`. */
export function v4Model(
  turns: readonly { content: V4Content[]; finishReason: V4FinishReason; usage: V4Usage }[],
  parts: (turn: { content: V4Content[]; finishReason: V4FinishReason; usage: V4Usage }) => V4StreamPart[],
) {
  let generated = 0;
  let streamed = 0;
  const calls: V4CallOptions[] = [];
  const model: LanguageModelV4 = {
    specificationVersion: "v4",
    provider: "hand",
    modelId: "v4-model",
    supportedUrls: {},
    doGenerate: async (options) => {
      calls.push(options);
      const turn = turns[generated++];
      if (turn === undefined) throw new Error("no more turns");
      return { ...turn, warnings: [] };
    },
    doStream: async (options) => {
      calls.push(options);
      const turn = turns[streamed++];
      if (turn === undefined) throw new Error("no more turns");
      return { stream: simulateReadableStream({ chunks: parts(turn) }) };
    },
  };
  return { model, calls };
}

/** Splits `text` in pieces of `size` code units (a surrogate pair may be cut: providers do). */
const cut = (text: string, size: number) =>
  text === ""
    ? []
    : Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));

/**
 * The parts a v4 provider streams for a turn: text and reasoning blocks, each tool call's input as
 * deltas (`text`-encoded: the raw string, when `textInputs` names the tool), the parts Loom keeps
 * nothing of (ping, custom, reasoning-file, approval requests, raw), then `finish`.
 */
export function v4Parts(textInputs: readonly string[], size = 3, withEnd = true) {
  return (turn: { content: V4Content[]; finishReason: V4FinishReason; usage: V4Usage }): V4StreamPart[] => {
    const parts: V4StreamPart[] = [
      { type: "stream-start", warnings: [] },
      { type: "response-metadata", id: "resp" },
    ];
    turn.content.forEach((part, i) => {
      parts.push({ type: "ping" });
      if (part.type === "text" || part.type === "reasoning") {
        const id = `b${i}`;
        parts.push({ type: `${part.type}-start`, id });
        for (const delta of cut(part.text, size)) parts.push({ type: `${part.type}-delta`, id, delta });
        parts.push({ type: `${part.type}-end`, id });
      } else if (part.type === "tool-call") {
        const id = part.toolCallId;
        const text = textInputs.includes(part.toolName);
        parts.push({
          type: "tool-input-start",
          id,
          toolName: part.toolName,
          ...(text ? { inputEncoding: "text" } : {}),
        });
        const raw = text ? (JSON.parse(part.input) as string) : part.input;
        for (const delta of cut(raw, size)) parts.push({ type: "tool-input-delta", id, delta });
        if (withEnd) parts.push({ type: "tool-input-end", id });
        parts.push(part);
      } else parts.push(part);
      parts.push({ type: "raw", rawValue: { i } });
    });
    parts.push({ type: "finish", usage: turn.usage, finishReason: turn.finishReason });
    return parts;
  };
}

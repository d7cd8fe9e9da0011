import {
  APICallError,
  type LanguageModelV2,
  type LanguageModelV2StreamPart,
  type LanguageModelV3Content,
  type LanguageModelV3FinishReason,
  type LanguageModelV3StreamPart,
  type LanguageModelV3Usage,
} from "@ai-sdk/provider";
import { MockLanguageModelV3, simulateReadableStream } from "ai/test";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fromAiSdk } from "../../src/ai-sdk/aiSdk.ts";
import { isModelStreamError } from "../../src/models/errors.ts";
import type { GenerateRequest, Model, ModelStreamPart } from "../../src/models/types.ts";
import { attemptError } from "../../src/policies/retry.ts";
import { streamPartsOf } from "../support/aiSdkStream.ts";

const request = (signal = new AbortController().signal): GenerateRequest => ({
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  signal,
});

const usageV3 = (input: number, output: number): LanguageModelV3Usage => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});

/** What a shaped response is made of: the content parts, and how the call finished. */
interface Shape {
  readonly content: LanguageModelV3Content[];
  readonly finishReason: LanguageModelV3FinishReason;
  readonly usage: LanguageModelV3Usage;
}

const streamOf = streamPartsOf;

const bothModels = (shape: Shape, cuts?: readonly number[]) => ({
  generated: fromAiSdk(
    new MockLanguageModelV3({
      doGenerate: { content: shape.content, finishReason: shape.finishReason, usage: shape.usage, warnings: [] },
    }),
  ),
  streamed: fromAiSdk(
    new MockLanguageModelV3({
      doStream: async () => ({ stream: simulateReadableStream({ chunks: streamOf(shape, cuts) }) }),
    }),
  ),
});

async function collect(model: Model, req = request()): Promise<ModelStreamPart[]> {
  const parts: ModelStreamPart[] = [];
  for await (const part of model.stream!(req)) parts.push(part);
  return parts;
}

const deltas = (parts: readonly ModelStreamPart[], type: "text-delta" | "reasoning-delta") =>
  parts.flatMap((p) => (p.type === type ? [p.delta] : [])).join("");

const stop = (unified: LanguageModelV3FinishReason["unified"]): LanguageModelV3FinishReason => ({
  unified,
  raw: unified,
});

const SHAPES: Record<string, Shape> = {
  "text only": {
    content: [{ type: "text", text: "The weather in Paris is mild." }],
    finishReason: stop("stop"),
    usage: usageV3(12, 7),
  },
  "tool calls": {
    content: [
      { type: "tool-call", toolCallId: "c1", toolName: "weather", input: '{"city":"Paris"}' },
      { type: "tool-call", toolCallId: "c2", toolName: "now", input: "" },
      { type: "tool-call", toolCallId: "c3", toolName: "weather", input: '{"city":' },
    ],
    finishReason: stop("tool-calls"),
    usage: usageV3(20, 9),
  },
  "text and tool calls": {
    content: [
      { type: "text", text: "Checking both. " },
      { type: "tool-call", toolCallId: "c1", toolName: "weather", input: '{"city":"Oslo"}' },
      { type: "text", text: "One moment." },
      { type: "tool-call", toolCallId: "srv", toolName: "web_search", input: '{"q":"x"}', providerExecuted: true },
    ],
    finishReason: stop("tool-calls"),
    usage: usageV3(5, 5),
  },
  reasoning: {
    content: [
      { type: "reasoning", text: "The user wants a number; 2 + 2 is 4." },
      { type: "text", text: "4" },
    ],
    finishReason: stop("stop"),
    usage: usageV3(3, 30),
  },
  "no usage, length": {
    content: [{ type: "text", text: "Cut sho" }],
    finishReason: stop("length"),
    usage: {
      inputTokens: { total: undefined, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined },
    },
  },
  empty: { content: [], finishReason: stop("content-filter"), usage: usageV3(1, 0) },
};

describe("fromAiSdk: stream", () => {
  for (const [name, shape] of Object.entries(SHAPES)) {
    it(`assembles the response doGenerate gives for the same content: ${name}`, async () => {
      const { generated, streamed } = bothModels(shape);
      const parts = await collect(streamed);
      const last = parts.at(-1);
      expect(last?.type).toBe("response");
      expect(parts.filter((p) => p.type === "response")).toHaveLength(1);
      const response = (last as Extract<ModelStreamPart, { type: "response" }>).response;
      expect(response).toEqual(await generated.generate(request()));
      expect(deltas(parts, "text-delta")).toBe(response.content ?? "");
    });
  }

  it("assembles doGenerate's response for any content, however the deltas are cut (property)", async () => {
    const part = fc.oneof(
      fc.record({ type: fc.constant("text" as const), text: fc.string() }),
      fc.record({ type: fc.constant("reasoning" as const), text: fc.string() }),
      fc.record({
        type: fc.constant("tool-call" as const),
        toolName: fc.constantFrom("weather", "now", "search"),
        input: fc.oneof(fc.json(), fc.string()),
        providerExecuted: fc.boolean(),
      }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(part, { maxLength: 6 }),
        fc.array(fc.nat(40), { maxLength: 4 }),
        fc.constantFrom("stop", "tool-calls", "length", "error", "other"),
        fc.option(fc.nat(1000), { nil: undefined }),
        async (drawn, cuts, reason, tokens) => {
          const content = drawn.map((p, i): LanguageModelV3Content => {
            if (p.type !== "tool-call") return p;
            const { providerExecuted, ...call } = p;
            return { ...call, toolCallId: `c${i}`, ...(providerExecuted ? { providerExecuted } : {}) };
          });
          const usage = tokens === undefined ? SHAPES["no usage, length"]!.usage : usageV3(tokens, tokens + 1);
          const shape = { content, finishReason: stop(reason as LanguageModelV3FinishReason["unified"]), usage };
          const { generated, streamed } = bothModels(shape, cuts);
          const parts = await collect(streamed);
          const last = parts.at(-1) as Extract<ModelStreamPart, { type: "response" }>;
          expect(last.response).toEqual(await generated.generate(request()));
          expect(deltas(parts, "text-delta")).toBe(last.response.content ?? "");
          const thoughts = content.flatMap((c) => (c.type === "reasoning" ? [c.text] : [])).join("");
          expect(deltas(parts, "reasoning-delta")).toBe(thoughts);
        },
      ),
      { numRuns: 100 },
    );
  });

  it("streams tool-input deltas with their call's id and tool name, not those of provider-executed calls", async () => {
    const parts = await collect(bothModels(SHAPES["text and tool calls"]!, [4]).streamed);
    const inputs = parts.filter((p) => p.type === "tool-input-delta");
    expect(inputs).toEqual([
      { type: "tool-input-delta", toolCallId: "c1", toolName: "weather", delta: '{"ci' },
      { type: "tool-input-delta", toolCallId: "c1", toolName: "weather", delta: 'ty":"Oslo"}' },
    ]);
    expect(parts.map((p) => p.type)).toEqual([
      "text-delta",
      "text-delta",
      "tool-input-delta",
      "tool-input-delta",
      "text-delta",
      "text-delta",
      "response",
    ]);
  });

  it("streams a v2 model (text-delta with delta, usage as numbers, finish reason a string)", async () => {
    const chunks: LanguageModelV2StreamPart[] = [
      { type: "stream-start", warnings: [] },
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "Hel" },
      { type: "text-delta", id: "t", delta: "lo" },
      { type: "text-end", id: "t" },
      { type: "tool-input-start", id: "c1", toolName: "now" },
      { type: "tool-input-delta", id: "c1", delta: "{}" },
      { type: "tool-input-end", id: "c1" },
      { type: "tool-call", toolCallId: "c1", toolName: "now", input: "{}" },
      { type: "finish", finishReason: "tool-calls", usage: { inputTokens: 4, outputTokens: 2, totalTokens: 6 } },
    ];
    const v2: LanguageModelV2 = {
      specificationVersion: "v2",
      provider: "test",
      modelId: "v2",
      supportedUrls: {},
      doGenerate: async () => {
        throw new Error("not called");
      },
      doStream: async () => ({ stream: simulateReadableStream({ chunks }) }),
    };
    const parts = await collect(fromAiSdk(v2));
    expect(parts).toEqual([
      { type: "text-delta", delta: "Hel" },
      { type: "text-delta", delta: "lo" },
      { type: "tool-input-delta", toolCallId: "c1", toolName: "now", delta: "{}" },
      {
        type: "response",
        response: {
          content: "Hello",
          toolCalls: [{ id: "c1", name: "now", input: {} }],
          usage: { inputTokens: 4, outputTokens: 2 },
          finishReason: "tool-calls",
        },
      },
    ]);
  });

  it("passes the request's signal and the call settings to doStream, and calls it only when read", async () => {
    const model = new MockLanguageModelV3({
      doStream: async () => ({ stream: simulateReadableStream({ chunks: streamOf(SHAPES["text only"]!) }) }),
    });
    const signal = new AbortController().signal;
    const stream = fromAiSdk(model, { temperature: 0 }).stream!(request(signal));
    expect(model.doStreamCalls).toHaveLength(0);
    await collect({ generate: async () => ({ toolCalls: [] }), stream: () => stream });
    expect(model.doStreamCalls[0]).toMatchObject({ temperature: 0, abortSignal: signal });
    expect(model.doStreamCalls[0]).not.toHaveProperty("stream");
  });

  it("has no stream with { stream: false }, or when the model has no doStream", () => {
    const model = new MockLanguageModelV3({});
    expect(fromAiSdk(model).stream).toBeTypeOf("function");
    expect(fromAiSdk(model, { stream: false }).stream).toBeUndefined();
    const { doStream: _none, ...generateOnly } = model;
    expect(
      fromAiSdk({ ...generateOnly, specificationVersion: "v3", doGenerate: model.doGenerate }).stream,
    ).toBeUndefined();
  });
});

describe("fromAiSdk: stream failures", () => {
  const failing = (chunks: LanguageModelV3StreamPart[]) =>
    fromAiSdk(new MockLanguageModelV3({ doStream: async () => ({ stream: simulateReadableStream({ chunks }) }) }));
  const apiError = (statusCode: number, isRetryable: boolean) =>
    new APICallError({
      message: `HTTP ${statusCode}`,
      url: "https://api.test/v1",
      requestBodyValues: {},
      statusCode,
      isRetryable,
    });

  it("throws an error part's APICallError as it is, so the failure policy reads its status and isRetryable", async () => {
    const overloaded = apiError(529, true);
    const stream = failing([
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "Par" },
      { type: "error", error: overloaded },
    ]);
    const seen: ModelStreamPart[] = [];
    const error = await (async () => {
      for await (const part of stream.stream!(request())) seen.push(part);
    })().catch((e: unknown) => e);
    expect(error).toBe(overloaded);
    expect(seen).toEqual([{ type: "text-delta", delta: "Par" }]);
    expect(attemptError(error, Date.now())).toMatchObject({ name: "AI_APICallError", status: 529, retryable: true });
    const denied = await collect(failing([{ type: "error", error: apiError(400, false) }])).catch((e: unknown) => e);
    expect(attemptError(denied, Date.now())).toMatchObject({ status: 400, retryable: false });
  });

  it("wraps an error part that is not an Error (a provider's JSON) as a retryable ModelStreamError", async () => {
    const error = await collect(failing([{ type: "error", error: { type: "overloaded_error" } }])).catch(
      (e: unknown) => e,
    );
    expect(isModelStreamError(error) && error.code).toBe("streamError");
    expect((error as Error).message).toContain('{"type":"overloaded_error"}');
    expect(attemptError(error, Date.now())).toMatchObject({ name: "ModelStreamError", retryable: true });
  });

  it("passes on what a stream throws, and fails a stream cut before its finish part", async () => {
    const reset = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    let sent = false;
    const throwing = fromAiSdk(
      new MockLanguageModelV3({
        doStream: async () => ({
          stream: new ReadableStream<LanguageModelV3StreamPart>({
            pull(controller) {
              if (sent) return controller.error(reset);
              sent = true;
              controller.enqueue({ type: "text-delta", id: "t", delta: "Hi" });
            },
          }),
        }),
      }),
    );
    const thrown = await collect(throwing).catch((e: unknown) => e);
    expect(thrown).toBe(reset);
    expect(attemptError(thrown, Date.now()).retryable).toBe(true);
    const cut = await collect(failing([{ type: "text-delta", id: "t", delta: "Hi" }])).catch((e: unknown) => e);
    expect(isModelStreamError(cut) && cut.code).toBe("incompleteStream");
    expect(attemptError(cut, Date.now()).retryable).toBe(true);
  });

  it("passes on doStream's own rejection", async () => {
    const unauthorized = apiError(401, false);
    const model = fromAiSdk(new MockLanguageModelV3({ doStream: async () => Promise.reject(unauthorized) }));
    await expect(collect(model)).rejects.toBe(unauthorized);
  });

  it("cancels the provider's stream when the consumer stops early", async () => {
    let cancelled = false;
    const model = fromAiSdk(
      new MockLanguageModelV3({
        doStream: async () => ({
          stream: new ReadableStream<LanguageModelV3StreamPart>({
            pull(controller) {
              controller.enqueue({ type: "text-delta", id: "t", delta: "more " });
            },
            cancel() {
              cancelled = true;
            },
          }),
        }),
      }),
    );
    let n = 0;
    for await (const _part of model.stream!(request())) if (++n === 3) break;
    expect(cancelled).toBe(true);
  });
});

import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { isModelStreamError } from "../../src/models/errors.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { GenerateRequest, Model, ModelResponse, ModelStreamPart } from "../../src/models/types.ts";
import { attemptError } from "../../src/policies/retry.ts";
import { withLimits } from "../../src/runtime/steps/failurePolicy.ts";
import { type ModelStreamDelta, streamModelCall } from "../../src/runtime/steps/modelStream.ts";

const request = (signal = new AbortController().signal): GenerateRequest => ({
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  signal,
});

const answer: ModelResponse = { content: "Paris is mild today.", toolCalls: [], finishReason: "stop" };

/** A model that streams `steps`: a part, or a pause in ms; it records what happened to it. */
function timedModel(steps: readonly (ModelStreamPart | number)[]) {
  const seen = { signal: undefined as AbortSignal | undefined, closed: false };
  const model: Model = {
    generate: async () => {
      throw new Error("generate is not called when the model streams");
    },
    async *stream(req) {
      seen.signal = req.signal;
      try {
        for (const step of steps) {
          if (typeof step === "number")
            await sleep(step); // ignores the signal on purpose
          else yield step;
        }
      } finally {
        seen.closed = true;
      }
    },
  };
  return { model, seen };
}

const text = (delta: string): ModelStreamPart => ({ type: "text-delta", delta });
const response = (r: ModelResponse = answer): ModelStreamPart => ({ type: "response", response: r });

describe("streamModelCall", () => {
  it("passes every delta to onPart in order and returns the response", async () => {
    const scripted: ModelResponse = {
      content: "Checking the weather.",
      toolCalls: [{ id: "c1", name: "weather", input: { city: "Paris" } }],
    };
    const parts: ModelStreamDelta[] = [];
    const got = await streamModelCall(scriptedModel([scripted]), request(), { onPart: (p) => parts.push(p) });
    expect(got).toBe(scripted);
    expect(parts).toEqual([
      { type: "text-delta", delta: "Checking " },
      { type: "text-delta", delta: "the " },
      { type: "text-delta", delta: "weather." },
      { type: "tool-input-delta", toolCallId: "c1", toolName: "weather", delta: '{"city":' },
      { type: "tool-input-delta", toolCallId: "c1", toolName: "weather", delta: '"Paris"}' },
    ]);
  });

  it("calls generate when the model has no stream, its response told as one delta per text and tool input", async () => {
    const model = scriptedModel([answer], { stream: false });
    const parts: ModelStreamDelta[] = [];
    expect(await streamModelCall(model, request(), { firstChunkMs: 1, onPart: (p) => parts.push(p) })).toBe(answer);
    expect(parts).toEqual([{ type: "text-delta", delta: "Paris is mild today." }]);
    const calling: ModelResponse = { toolCalls: [{ id: "c1", name: "weather", input: { city: "Paris" } }] };
    parts.length = 0;
    await streamModelCall(scriptedModel([calling], { stream: false }), request(), { onPart: (p) => parts.push(p) });
    expect(parts).toEqual([
      { type: "tool-input-delta", toolCallId: "c1", toolName: "weather", delta: '{"city":"Paris"}' },
    ]);
  });

  it("fails a call whose first part takes longer than firstChunkMs: aborts its signal, closes it, retryable", async () => {
    const { model, seen } = timedModel([200, text("late"), response()]);
    const started = Date.now();
    const error = await streamModelCall(model, request(), {
      firstChunkMs: 30,
      what: "model call m#turn:0:model",
    }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(150);
    expect(isModelStreamError(error) && error.code).toBe("firstChunkTimeout");
    expect((error as Error).message).toContain("model call m#turn:0:model");
    expect((error as Error).message).toContain("timeouts.firstChunkMs");
    expect(seen.signal?.aborted).toBe(true);
    expect(attemptError(error, Date.now())).toMatchObject({ name: "ModelStreamError", retryable: true });
    await sleep(250);
    expect(seen.closed).toBe(true); // closed once its pending step ended
  });

  it("fails a stream that stalls longer than chunkIdleMs after its deltas so far", async () => {
    const { model, seen } = timedModel([text("Par"), text("is"), 200, text(" is"), response()]);
    const parts: ModelStreamDelta[] = [];
    const error = await streamModelCall(model, request(), {
      firstChunkMs: 1_000,
      chunkIdleMs: 30,
      onPart: (p) => parts.push(p),
    }).catch((e: unknown) => e);
    expect(isModelStreamError(error) && error.code).toBe("chunkIdleTimeout");
    expect(attemptError(error, Date.now()).retryable).toBe(true);
    expect(parts).toEqual([text("Par"), text("is")]);
    expect(seen.signal?.aborted).toBe(true);
  });

  it("applies chunkIdleMs between parts only: a slow first part and a long steady stream pass", async () => {
    const steady = [60, text("a"), 15, text("b"), 15, text("c"), 15, text("d"), 15, text("e"), 15, response()];
    const { model } = timedModel(steady);
    const parts: ModelStreamDelta[] = [];
    const got = await streamModelCall(model, request(), {
      firstChunkMs: 200,
      chunkIdleMs: 45,
      onPart: (p) => parts.push(p),
    });
    expect(got).toBe(answer);
    expect(parts.map((p) => (p.type === "text-delta" ? p.delta : "")).join("")).toBe("abcde");
  });

  it("fails a stream that ends without its response part", async () => {
    const { model } = timedModel([text("Hi")]);
    const error = await streamModelCall(model, request()).catch((e: unknown) => e);
    expect(isModelStreamError(error) && error.code).toBe("incompleteStream");
    expect(attemptError(error, Date.now()).retryable).toBe(true);
  });

  it("stops at the response and closes the stream, whatever would follow it", async () => {
    const { model, seen } = timedModel([text("a"), response(), text("never")]);
    const parts: ModelStreamDelta[] = [];
    expect(await streamModelCall(model, request(), { onPart: (p) => parts.push(p) })).toBe(answer);
    await sleep(0);
    expect(parts).toEqual([text("a")]);
    expect(seen.closed).toBe(true);
  });

  it("rejects with the signal's reason as soon as the request is aborted, though the model ignores it", async () => {
    const { model, seen } = timedModel([text("a"), 300, response()]);
    const controller = new AbortController();
    const call = streamModelCall(model, request(controller.signal), {
      onPart: () => controller.abort(new Error("user left")),
    });
    const started = Date.now();
    await expect(call).rejects.toThrow("user left");
    expect(Date.now() - started).toBeLessThan(150);
    expect(seen.signal?.aborted).toBe(true);
    const already = new AbortController();
    already.abort(new Error("gone"));
    await expect(streamModelCall(model, request(already.signal))).rejects.toThrow("gone");
  });

  it("passes on what the model throws as it is", async () => {
    const boom = Object.assign(new Error("HTTP 503"), { statusCode: 503 });
    const model: Model = {
      generate: async () => answer,
      // biome-ignore lint/correctness/useYield: a stream that fails before its first part
      async *stream() {
        throw boom;
      },
    };
    await expect(streamModelCall(model, request(), { firstChunkMs: 1_000 })).rejects.toBe(boom);
  });
});

describe("streamModelCall inside withLimits (as the loop calls it)", () => {
  it("leaves modelAttemptMs to withLimits: a steady stream longer than the attempt limit is stopped as a timeout", async () => {
    const steady = Array.from({ length: 40 }, (_, i) => [10, text(`w${i} `)]).flat();
    const { model, seen } = timedModel([...steady, response()]);
    const outer = new AbortController();
    const parts: ModelStreamDelta[] = [];
    const result = await withLimits(outer.signal, 80, undefined, (stop) =>
      streamModelCall(model, request(stop.signal), {
        firstChunkMs: 1_000,
        chunkIdleMs: 50,
        onPart: (p) => parts.push(p),
      }),
    );
    expect("error" in result && result.stopped).toBe("timeout");
    expect(seen.signal?.aborted).toBe(true);
    expect(parts.length).toBeGreaterThan(2);
    expect(parts.length).toBeLessThan(40);
  });

  it("gives withLimits the chunk timeout as the effect's own error (stopped undefined), retryable", async () => {
    const { model } = timedModel([300, response()]);
    const result = await withLimits(new AbortController().signal, 5_000, undefined, (stop) =>
      streamModelCall(model, request(stop.signal), { firstChunkMs: 20 }),
    );
    expect("error" in result && result.stopped).toBeUndefined();
    const error = "error" in result ? result.error : undefined;
    expect(isModelStreamError(error) && error.code).toBe("firstChunkTimeout");
    expect(attemptError(error, Date.now()).retryable).toBe(true);
  });
});

describe("scriptedModel: stream", () => {
  it("streams word deltas and tool-input halves that concatenate to the response it generates", async () => {
    const script = [{ content: "  Two  words ", toolCalls: [{ id: "c1", name: "add", input: { a: 1, b: 2 } }] }];
    const parts: ModelStreamPart[] = [];
    for await (const part of scriptedModel(script).stream!(request())) parts.push(part);
    expect(parts.at(-1)).toEqual({ type: "response", response: script[0] });
    const joined = (type: string) => parts.map((p) => (p.type === type && "delta" in p ? p.delta : "")).join("");
    expect(joined("text-delta")).toBe("  Two  words ");
    expect(JSON.parse(joined("tool-input-delta"))).toEqual({ a: 1, b: 2 });
  });

  it("counts a streamed call as a call, and pauses deltaDelayMs before each delta", async () => {
    const model = scriptedModel([{ content: "one two three", toolCalls: [] }], { deltaDelayMs: 20 });
    const started = Date.now();
    expect(await streamModelCall(model, request())).toEqual({ content: "one two three", toolCalls: [] });
    expect(Date.now() - started).toBeGreaterThanOrEqual(55);
    expect(model.calls).toBe(1);
  });
});

import type { LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, it } from "vitest";
import { fromAiSdk } from "../../src/ai-sdk/aiSdk.ts";
import {
  agentLoop$,
  createJournal,
  isAgentInterruptedError,
  isModelCapabilityError,
  type Model,
  ModelCapabilityError,
  type ModelResponse,
  memoryStore,
  type RunEvent,
  readJournal,
} from "../../src/index.ts";
import { streamModelCall } from "../../src/journal.ts";
import { streamedAs } from "../support/aiSdkStream.ts";
import { journalText } from "../support/journalText.ts";

/**
 * Loom's one streaming rule (issue 36): a model call streams whenever the model can, whoever
 * watches the run, and falls back to generate when it cannot; the journal is the same either way,
 * and a model that can do neither fails with a ModelCapabilityError naming the run and the step.
 */
const turn = (text: string, call?: { id: string; input: string }): LanguageModelV3GenerateResult => ({
  content: [
    { type: "text", text },
    ...(call ? [{ type: "tool-call" as const, toolCallId: call.id, toolName: "lookup", input: call.input }] : []),
  ],
  finishReason: { unified: call ? "tool-calls" : "stop", raw: undefined },
  usage: {
    inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 5, text: 5, reasoning: undefined },
  },
  warnings: [],
});
const TURNS = [turn("Looking order 7 up.", { id: "c1", input: '{"order":7}' }), turn("Order 7 ships today.")];
const lookup = { description: "looks an order up", execute: async () => ({ status: "shipped" }) };

/** AI SDK mocks given only one method: the other throws "Not implemented", as MockLanguageModelV3 does. */
const streamOnly = () => new MockLanguageModelV3({ doStream: TURNS.map(streamedAs) });
const generateOnly = () => new MockLanguageModelV3({ doGenerate: TURNS });

const loopOf = (model: Model) => agentLoop$({ id: "rule", model, tools: { lookup }, searchTools: false });
const journal = () => createJournal({ store: memoryStore({ json: true }) });
/** The journal's entries without their wall clock: what must be the same whoever watched. */
const entriesOf = async (j: ReturnType<typeof journal>, runId: string) => journalText(await readJournal(j, runId));

describe("one streaming rule: stream whenever the model can, whoever watches", () => {
  it("a doStream-only model answers a plain run (nobody watches): doStream is called, doGenerate never", async () => {
    const mock = streamOnly();
    const out = await loopOf(fromAiSdk(mock)).run({ runId: "plain", input: "where is order 7?", journal: journal() });
    expect(out.content).toBe("Order 7 ships today.");
    expect(mock.doStreamCalls).toHaveLength(2);
    expect(mock.doGenerateCalls).toHaveLength(0);
  });

  it("a model object with doStream and no doGenerate at all is taken, and answers a plain run", async () => {
    const mock = streamOnly();
    const bare = { specificationVersion: "v3" as const, provider: "p", modelId: "m", doStream: mock.doStream };
    const out = await loopOf(fromAiSdk(bare)).run({ runId: "bare", input: "where is order 7?", journal: journal() });
    expect(out.content).toBe("Order 7 ships today.");
  });

  it("a doGenerate-only model answers loop.stream and onEvent: one delta of each call's text, before its model-finished", async () => {
    const mock = generateOnly();
    const loop = loopOf(fromAiSdk(mock));
    const events: RunEvent[] = [];
    const stream = loop.stream({ runId: "watched", input: "where is order 7?", journal: journal() });
    for await (const event of stream) events.push(event);
    expect((await stream.output).content).toBe("Order 7 ships today.");
    const deltas = events.filter((e) => e.type === "text-delta" || e.type === "tool-input-delta");
    expect(deltas.map((e) => [e.type, e.stepId, "delta" in e ? e.delta : undefined])).toEqual([
      ["text-delta", "rule#turn:0:model", "Looking order 7 up."],
      ["tool-input-delta", "rule#turn:0:model", '{"order":7}'],
      ["text-delta", "rule#turn:1:model", "Order 7 ships today."],
    ]);
    for (const finished of events.filter((e) => e.type === "model-finished")) {
      const last = events.findLastIndex((e) => e.type === "text-delta" && e.stepId === finished.stepId);
      expect(last).toBeLessThan(events.indexOf(finished));
    }
    // The fallback is learned once: doStream was tried on the first call only.
    expect(mock.doStreamCalls).toHaveLength(1);
    expect(mock.doGenerateCalls).toHaveLength(2);

    const told: RunEvent[] = [];
    const onEvent = await loopOf(fromAiSdk(generateOnly())).run({
      runId: "onEvent",
      input: "where is order 7?",
      journal: journal(),
      onEvent: (e) => told.push(e),
    });
    expect(onEvent.content).toBe("Order 7 ships today.");
    expect(told.filter((e) => e.type === "text-delta").map((e) => ("delta" in e ? e.delta : ""))).toEqual([
      "Looking order 7 up.",
      "Order 7 ships today.",
    ]);
  });

  it("journals the same entries, byte for byte, watched or not, streamed or generated", async () => {
    const runs: string[][] = [];
    for (const make of [streamOnly, generateOnly]) {
      const plain = journal();
      await loopOf(fromAiSdk(make())).run({ runId: "r", input: "where is order 7?", journal: plain });
      runs.push(await entriesOf(plain, "r"));
      const watched = journal();
      const stream = loopOf(fromAiSdk(make())).stream({ runId: "r", input: "where is order 7?", journal: watched });
      for await (const _ of stream);
      await stream.output;
      runs.push(await entriesOf(watched, "r"));
    }
    expect(runs[0]?.length).toBeGreaterThan(4);
    for (const run of runs.slice(1)) expect(run).toEqual(runs[0]);
  });

  it("a Loom Model whose stream throws ModelCapabilityError before its first part is answered by generate", async () => {
    let streams = 0;
    const model: Model = {
      generate: async ({ messages }) =>
        messages.some((m) => m.role === "tool")
          ? { content: "Order 7 ships today.", toolCalls: [] }
          : { toolCalls: [{ id: "c1", name: "lookup", input: { order: 7 } }] },
      // biome-ignore lint/correctness/useYield: a stream that fails before it yields anything
      async *stream() {
        streams++;
        throw new ModelCapabilityError(["stream"], "this model does not stream");
      },
    };
    const out = await loopOf(model).run({ runId: "own", input: "where is order 7?", journal: journal() });
    expect(out.content).toBe("Order 7 ships today.");
    expect(streams).toBe(1);
  });
});

describe("a model that can neither stream nor generate", () => {
  it("interrupts the run at once (model-error) with a ModelCapabilityError naming both methods, the run and the step", async () => {
    const mock = new MockLanguageModelV3({});
    const j = journal();
    const error = await loopOf(fromAiSdk(mock))
      .run({ runId: "r-none", input: "hi", journal: j })
      .catch((e: unknown) => e);
    expect(isAgentInterruptedError(error)).toBe(true);
    if (!isAgentInterruptedError(error)) return;
    expect(error.run.reason).toBe("model-error");
    expect(error.cause).toMatchObject({ name: "ModelCapabilityError", retryable: false });
    expect(error.cause?.message).toMatch(/^run r-none, model call rule#turn:0:model: the model can neither stream/);
    expect(error.cause?.message).toMatch(/doStream is not implemented/);
    expect(error.cause?.message).toMatch(/doGenerate is not implemented/);
    expect(error.message).toMatch(/ModelCapabilityError/);
    // Never retried: one attempt of each method.
    expect(mock.doStreamCalls).toHaveLength(1);
    expect(mock.doGenerateCalls).toHaveLength(1);
    expect((await readJournal(j, "r-none")).filter((e) => e.type === "frame.started")).toHaveLength(1);
  });

  it("streamModelCall throws the ModelCapabilityError itself, with its code, missing methods, run and step", async () => {
    const error = await streamModelCall(
      fromAiSdk(new MockLanguageModelV3({})),
      { messages: [{ role: "user", content: "hi" }], tools: [], signal: new AbortController().signal },
      { runId: "r-1", stepId: "support#turn:3:model" },
    ).catch((e: unknown) => e);
    expect(isModelCapabilityError(error)).toBe(true);
    expect(error).toMatchObject({
      name: "ModelCapabilityError",
      code: "modelMethodMissing",
      missing: ["doStream", "doGenerate"],
      runId: "r-1",
      stepId: "support#turn:3:model",
      isRetryable: false,
    });
    expect((error as Error).message).toMatch(/^run r-1, model call support#turn:3:model: /);
    expect((error as Error).message).toMatch(/pass doStream or doGenerate/);
  });

  it("a model without stream whose generate is not implemented names generate and the absent stream", async () => {
    const model: Model = {
      generate: async () => {
        throw new ModelCapabilityError(["generate"], "my model only streams, and its stream is off");
      },
    };
    const error = await streamModelCall(
      model,
      { messages: [], tools: [], signal: new AbortController().signal },
      { stepId: "s#turn:0:model" },
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ missing: ["stream", "generate"], stepId: "s#turn:0:model", runId: undefined });
    expect((error as Error).message).toMatch(/it has no stream method; my model only streams/);
  });
});

describe("what is not a missing method", () => {
  it("a stream that fails after its first part is not answered by generate: the failure is the attempt's", async () => {
    let generated = 0;
    const model: Model = {
      generate: async () => {
        generated++;
        return { content: "never", toolCalls: [] } satisfies ModelResponse;
      },
      async *stream() {
        yield { type: "text-delta", delta: "Hel" };
        throw new ModelCapabilityError(["stream"], "gave up half way");
      },
    };
    const error = await streamModelCall(model, { messages: [], tools: [], signal: new AbortController().signal }).catch(
      (e: unknown) => e,
    );
    expect(isModelCapabilityError(error)).toBe(true);
    expect(generated).toBe(0);
  });
});

import { describe, expect, it } from "vitest";
import { fromAiSdk } from "../../src/ai-sdk/aiSdk.ts";
import { agentLoop$, createJournal, memoryStore, type RunEvent, readJournal } from "../../src/index.ts";
import { isModelStreamError } from "../../src/models/errors.ts";
import type { GenerateRequest, Model, ModelStreamPart } from "../../src/models/types.ts";
import { attemptError } from "../../src/policies/retry.ts";
import { usage, type V4Content, type V4FinishReason, type V4Usage, v4Model, v4Parts } from "../support/aiSdkV4.ts";
import { journalText } from "../support/journalText.ts";

const request = (messages: GenerateRequest["messages"] = [{ role: "user", content: "hi" }]): GenerateRequest => ({
  messages,
  tools: [],
  signal: new AbortController().signal,
});

async function collect(model: Model, req = request()): Promise<ModelStreamPart[]> {
  const out: ModelStreamPart[] = [];
  for await (const part of (model.stream as NonNullable<Model["stream"]>)(req)) out.push(part);
  return out;
}

const inputDeltas = (parts: readonly ModelStreamPart[], toolCallId: string) =>
  parts.flatMap((p) => (p.type === "tool-input-delta" && p.toolCallId === toolCallId ? [p.delta] : [])).join("");

// A string input with what JSON escapes: a quote, a backslash, a newline, a tab, and an emoji
// (a surrogate pair) that 3-unit pieces cut in two.
const PATCH = 'say "hi"\\\n\tok 👍 done';
const TURN = {
  content: [
    { type: "reasoning", text: "The user wants a patch." },
    { type: "text", text: "Applying the patch, then checking." },
    { type: "custom", kind: "hand.marker" },
    { type: "reasoning-file", mediaType: "image/png", data: { type: "data", data: "iVBORw0K" } },
    { type: "tool-call", toolCallId: "p1", toolName: "apply_patch", input: JSON.stringify(PATCH) },
    { type: "tool-call", toolCallId: "e1", toolName: "apply_patch", input: JSON.stringify("") },
    { type: "tool-call", toolCallId: "w1", toolName: "weather", input: '{"city":"Oslo"}' },
    { type: "tool-approval-request", approvalId: "a1", toolCallId: "w1" },
  ],
  finishReason: { unified: "tool-calls", raw: "tool_use" },
  usage: usage(30, 12),
} satisfies { content: V4Content[]; finishReason: V4FinishReason; usage: V4Usage };

describe("fromAiSdk: a specification v4 model's stream", () => {
  for (const withEnd of [true, false]) {
    it(`assembles the response doGenerate gives; every call's input deltas make its JSON text${withEnd ? "" : " (no tool-input-end)"}`, async () => {
      const generated = await fromAiSdk(v4Model([TURN], v4Parts([])).model).generate(request());
      const { model } = v4Model([TURN], v4Parts(["apply_patch"], 3, withEnd));
      const parts = await collect(fromAiSdk(model));
      const last = parts.at(-1) as Extract<ModelStreamPart, { type: "response" }>;
      expect(parts.filter((p) => p.type === "response")).toHaveLength(1);
      expect(last.response).toEqual(generated);
      expect(last.response).toMatchObject({
        content: "Applying the patch, then checking.",
        toolCalls: [
          { id: "p1", name: "apply_patch", input: PATCH },
          { id: "e1", name: "apply_patch", input: "" },
          { id: "w1", name: "weather", input: { city: "Oslo" } },
        ],
        usage: { inputTokens: 30, outputTokens: 12 },
        finishReason: "tool-calls",
      });
      const text = parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("");
      expect(text).toBe(last.response.content);
      const thoughts = parts.flatMap((p) => (p.type === "reasoning-delta" ? [p.delta] : [])).join("");
      expect(thoughts).toBe("The user wants a patch.");
      // A text-encoded input streams as the JSON text of the string: the deltas make the call's input.
      for (const call of TURN.content.filter((c) => c.type === "tool-call"))
        expect(inputDeltas(parts, call.toolCallId)).toBe(call.input);
      expect(parts.filter((p) => p.type === "tool-input-delta").every((p) => p.delta !== "")).toBe(true);
      // Each delta of the text input is JSON text on its own (no surrogate half escaped apart).
      for (const p of parts)
        if (p.type === "tool-input-delta" && p.toolCallId === "p1") expect(p.delta).not.toMatch(/\\ud[89ab]/i);
    });
  }

  it("fails an attempt whose stream finishes interrupted (v4: cut short), as a stream cut before finish, retryable", async () => {
    const cutShort = { ...TURN, finishReason: { unified: "interrupted" as const, raw: undefined } };
    const { model } = v4Model([cutShort], v4Parts(["apply_patch"]));
    const failure = await collect(fromAiSdk(model)).catch((e: unknown) => e);
    expect(isModelStreamError(failure) && failure.code).toBe("incompleteStream");
    expect((failure as Error).message).toMatch(/model hand\/v4-model: the provider reports the stream interrupted/);
    expect(attemptError(failure, Date.now()).retryable).toBe(true);
  });

  it("sends doStream the v4 call options: the prompt (execution-denied for a declined approval), tools, signal", async () => {
    const { model, calls } = v4Model([TURN], v4Parts([]));
    const declined = { error: "approval-declined", reason: "not today" };
    await collect(
      fromAiSdk(model, { temperature: 0 }),
      request([
        { role: "user", content: "patch it" },
        { role: "assistant", content: "ok", toolCalls: [{ id: "x", name: "rm", input: {} }] },
        { role: "tool", toolCallId: "x", toolName: "rm", output: declined, isError: true },
      ]),
    );
    expect(calls).toHaveLength(1);
    expect(calls[0]?.temperature).toBe(0);
    expect(calls[0]?.abortSignal).toBeInstanceOf(AbortSignal);
    expect(calls[0]?.prompt.at(-1)).toEqual({
      role: "tool",
      content: [
        {
          type: "tool-result",
          toolCallId: "x",
          toolName: "rm",
          output: { type: "execution-denied", reason: "not today" },
        },
      ],
    });
  });

  it("runs a loop on a v4 model: the streamed run's deltas make its content, its journal is the generated run's", async () => {
    const turns = [
      TURN,
      {
        content: [{ type: "text", text: "Patched; Oslo is sunny." }],
        finishReason: { unified: "stop", raw: "end_turn" },
        usage: usage(50, 6),
      } satisfies { content: V4Content[]; finishReason: V4FinishReason; usage: V4Usage },
    ];
    const tools = {
      apply_patch: {
        description: "applies a patch",
        execute: async (input: unknown) => ({ applied: String(input).length }),
      },
      weather: { description: "weather", execute: async () => ({ sky: "sunny" }) },
    };
    const streamedJournal = createJournal({ store: memoryStore({ json: true }) });
    const streamedModel = v4Model(turns, v4Parts(["apply_patch"]));
    const stream = agentLoop$({ id: "v4", model: fromAiSdk(streamedModel.model), tools }).stream({
      runId: "r",
      input: "patch and weather",
      journal: streamedJournal,
    });
    const events: RunEvent[] = [];
    for await (const event of stream) events.push(event);
    expect((await stream.output).content).toBe("Patched; Oslo is sunny.");
    for (const finished of events.filter((e) => e.type === "model-finished")) {
      const deltas = events.flatMap((e) => (e.type === "text-delta" && e.stepId === finished.stepId ? [e.delta] : []));
      expect(deltas.join("")).toBe(finished.content);
    }
    const patch = events.flatMap((e) => (e.type === "tool-input-delta" && e.toolCallId === "p1" ? [e.delta] : []));
    expect(JSON.parse(patch.join(""))).toBe(PATCH);

    const generatedJournal = createJournal({ store: memoryStore({ json: true }) });
    const generatedModel = v4Model(turns, v4Parts([]));
    await agentLoop$({ id: "v4", model: fromAiSdk(generatedModel.model, { stream: false }), tools }).run({
      runId: "r",
      input: "patch and weather",
      journal: generatedJournal,
    });
    // Byte for byte as docs/tool-call-log.md says: the three calls' results come as their tools finish.
    expect(journalText(await readJournal(streamedJournal, "r"))).toEqual(
      journalText(await readJournal(generatedJournal, "r")),
    );
  });
});

describe("fromAiSdk: which specifications it takes", () => {
  it.each([
    ["v1", /upgrade the provider package/],
    ["v5", /reads specifications "v2", "v3" and "v4": upgrade loom-agent/],
    ["V4", /pass an AI SDK LanguageModel of specification "v2", "v3" or "v4"/],
    [undefined, /pass an AI SDK LanguageModel of specification "v2", "v3" or "v4"/],
  ])("refuses specificationVersion %s with ModelAdapterError unsupportedModel", (version, fix) => {
    const model = { specificationVersion: version, provider: "hand", modelId: "m", doGenerate: async () => ({}) };
    let thrown: unknown;
    try {
      fromAiSdk(model as never);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toMatchObject({ name: "ModelAdapterError", code: "unsupportedModel" });
    const message = (thrown as Error).message;
    expect(message).toContain(`model hand/m has specificationVersion ${JSON.stringify(version)}`);
    expect(message).toMatch(fix);
  });
});

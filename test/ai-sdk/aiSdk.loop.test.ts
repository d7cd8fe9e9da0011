import type { LanguageModelV3Content, LanguageModelV3GenerateResult, LanguageModelV3Prompt } from "@ai-sdk/provider";
import { tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { fromAiSdk } from "../../src/ai-sdk/aiSdk.ts";
import { fromAiSdkTools } from "../../src/ai-sdk/aiSdkTools.ts";
import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { EventStore } from "../../src/events/store.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

const turn = (content: LanguageModelV3Content[]): LanguageModelV3GenerateResult => ({
  content,
  finishReason: { unified: content.some((p) => p.type === "tool-call") ? "tool-calls" : "stop", raw: undefined },
  usage: {
    inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 5, text: 5, reasoning: undefined },
  },
  warnings: [],
});

/** The model's three turns: tools (one malformed, one unknown); a failing tool and an approval; the answer. */
const TURNS: LanguageModelV3GenerateResult[] = [
  turn([
    { type: "text", text: "Looking it up." },
    { type: "tool-call", toolCallId: "m1", toolName: "weather", input: '{"city":"Paris"}' },
    { type: "tool-call", toolCallId: "m2", toolName: "weather", input: '{"city": Oslo}' },
    { type: "tool-call", toolCallId: "m3", toolName: "lookup", input: '{"q":"x"}' },
  ]),
  turn([
    { type: "tool-call", toolCallId: "m4", toolName: "convert", input: '{"celsius":21}' },
    { type: "tool-call", toolCallId: "m5", toolName: "share", input: '{"to":"everyone"}' },
  ]),
  turn([{ type: "text", text: "Paris: 21°C." }]),
];

function aiSdkTools() {
  const calls = { weather: 0, convert: 0, share: 0 };
  const tools = fromAiSdkTools({
    weather: tool({
      description: "The weather in a city",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls.weather++;
        return { city, celsius: 21 };
      },
    }),
    convert: tool({
      description: "Celsius to Fahrenheit",
      inputSchema: z.object({ celsius: z.number() }),
      execute: async (): Promise<number> => {
        calls.convert++;
        throw new Error("converter offline");
      },
    }),
    share: tool({
      description: "Share the forecast",
      inputSchema: z.object({ to: z.string() }),
      needsApproval: true,
      execute: async () => {
        calls.share++;
        return "shared";
      },
    }),
  });
  return { tools, calls };
}

/** A store that "crashes" (every append throws) once `when` sees the entry about to be appended. */
function crashingStore(store: EventStore, when: (type: string, data: unknown) => boolean): EventStore {
  let crashed = false;
  return {
    ...store,
    async append(runId, entries, options) {
      if (crashed || entries.some((e) => when(e.type, e.data))) {
        crashed = true;
        throw new Error("simulated crash");
      }
      return store.append(runId, entries, options);
    },
    read: (runId, options) => store.read(runId, options),
    listRuns: () => store.listRuns(),
    compact: (runId, request) => store.compact(runId, request),
    close: () => store.close(),
  };
}

describe("an agent loop on an AI SDK model and AI SDK tools", () => {
  it("runs 3 turns: malformed input, unknown tool, failing tool and a declined approval are fed back", async () => {
    const model = new MockLanguageModelV3({ doGenerate: TURNS });
    const { tools, calls } = aiSdkTools();
    const approve = vi.fn(() => false);
    const loop = agentLoop$({ id: "weather", model: fromAiSdk(model), tools, approve, searchTools: false });
    const journal = createJournal({ store: memoryStore({ json: true }) });

    const output = await loop.run({ runId: "r1", journal, input: "Weather in Paris?" });

    expect(output.content).toBe("Paris: 21°C.");
    expect(output.iterations).toBe(3);
    expect(model.doGenerateCalls).toHaveLength(3);
    expect(calls).toEqual({ weather: 1, convert: 1, share: 0 });
    expect(approve).toHaveBeenCalledTimes(1);

    const prompt: LanguageModelV3Prompt = model.doGenerateCalls[2]!.prompt;
    const results = prompt.flatMap((m) => (m.role === "tool" ? m.content : []));
    const outputs = Object.fromEntries(
      results.map((r) => [
        r.type === "tool-result" ? r.toolCallId : "?",
        r.type === "tool-result" ? r.output : undefined,
      ]),
    );
    expect(outputs.m1).toEqual({ type: "json", value: { city: "Paris", celsius: 21 } });
    expect(outputs.m2?.type).toMatch(/^error-/); // malformed JSON: settled as invalid input
    expect(JSON.stringify(outputs.m2)).toMatch(/JSON/);
    expect(outputs.m3?.type).toMatch(/^error-/); // unknown tool
    expect(JSON.stringify(outputs.m3)).toMatch(/lookup/);
    expect(outputs.m4?.type).toMatch(/^error-/); // the tool threw
    expect(JSON.stringify(outputs.m4)).toMatch(/converter offline/);
    expect(outputs.m5?.type).toBe("execution-denied"); // declined approval
    // the malformed call is replayed to the model as {} (its error is in the result)
    const replayed = prompt
      .flatMap((m) => (m.role === "assistant" ? m.content : []))
      .find((p) => p.type === "tool-call" && p.toolCallId === "m2");
    expect(replayed).toMatchObject({ input: {} });
  });

  it("resumes after a crash without calling the model again for journaled turns", async () => {
    const base = memoryStore({ json: true });
    const first = new MockLanguageModelV3({ doGenerate: TURNS });
    const run1 = aiSdkTools();
    // The process dies as the third model call's response is about to be journaled.
    const store = crashingStore(
      base,
      (type, data) => type === "frame.completed" && (data as { frameId: string }).frameId === "weather#turn:2:model",
    );
    const loop1 = agentLoop$({
      id: "weather",
      model: fromAiSdk(first),
      tools: run1.tools,
      approve: () => false,
      searchTools: false,
    });
    await expect(
      loop1.run({ runId: "r2", journal: createJournal({ store }), input: "Weather in Paris?" }),
    ).rejects.toThrow();
    expect(first.doGenerateCalls).toHaveLength(3);

    const second = new MockLanguageModelV3({ doGenerate: [TURNS[2]!] });
    const run2 = aiSdkTools();
    const approve = vi.fn(() => false);
    const loop2 = agentLoop$({
      id: "weather",
      model: fromAiSdk(second),
      tools: run2.tools,
      approve,
      searchTools: false,
    });
    const output = await loop2.run({ runId: "r2", journal: createJournal({ store: base }) });

    expect(output.content).toBe("Paris: 21°C.");
    expect(second.doGenerateCalls).toHaveLength(1); // turns 0 and 1 were served from the journal
    expect(run2.calls).toEqual({ weather: 0, convert: 0, share: 0 }); // no tool ran again
    expect(approve).not.toHaveBeenCalled(); // the declined approval is a recorded decision
    expect(second.doGenerateCalls[0]!.prompt).toEqual(first.doGenerateCalls[2]!.prompt); // same conversation rebuilt

    const again = new MockLanguageModelV3({ doGenerate: [] });
    const loop3 = agentLoop$({ id: "weather", model: fromAiSdk(again), tools: aiSdkTools().tools, searchTools: false });
    expect(await loop3.run({ runId: "r2", journal: createJournal({ store: base }) })).toEqual(output);
    expect(again.doGenerateCalls).toHaveLength(0); // a completed run calls nothing
  });
});

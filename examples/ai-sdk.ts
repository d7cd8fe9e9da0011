import type { LanguageModelV3Content, LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import { tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { agentLoop$, createJournal, memoryStore } from "loom-agent";
import { fromAiSdk, fromAiSdkTools } from "loom-agent/ai-sdk";
import { z } from "zod";

/**
 * The models and tools an agent runtime already has from the AI SDK, run by Loom. Any
 * LanguageModel works (`openai("…")`, `anthropic("…")`); a mock keeps this example offline.
 */
export async function aiSdkExample() {
  const model = new MockLanguageModelV3({
    doGenerate: [
      turn([{ type: "tool-call", toolCallId: "c1", toolName: "weather", input: '{"city":"Paris"}' }]),
      turn([{ type: "text", text: "Sunny, 24 °C in Paris." }]),
    ],
  });
  const tools = fromAiSdkTools({
    weather: tool({
      description: "Today's weather in a city",
      inputSchema: z.object({ city: z.string() }), // checked before the tool runs
      execute: async ({ city }) => ({ city, sky: "sunny", celsius: 24 }),
    }),
  });
  const loop = agentLoop$({ id: "weather-bot", model: fromAiSdk(model), tools });
  const journal = createJournal({ store: memoryStore({ json: true }) });
  const out = await loop.run({ runId: "paris", input: "Weather in Paris?", journal });
  return { out, modelCalls: model.doGenerateCalls.length };
}

// A finished generation in the AI SDK's v3 shape: what a provider's doGenerate returns.
function turn(content: LanguageModelV3Content[]): LanguageModelV3GenerateResult {
  const calls = content.some((part) => part.type === "tool-call");
  return {
    content,
    finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined },
    usage: {
      inputTokens: { total: 12, noCache: 12, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 6, text: 6, reasoning: undefined },
    },
    warnings: [],
  };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) console.log((await aiSdkExample()).out);

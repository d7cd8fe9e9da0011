import { describe, expect, it } from "vitest";
import { aiSdkExample } from "../../examples/ai-sdk.ts";

describe("examples/ai-sdk.ts", () => {
  it("runs an AI SDK model and an AI SDK tool through the loop", async () => {
    const { out, modelCalls } = await aiSdkExample();
    expect(modelCalls).toBe(2);
    expect(out.content).toBe("Sunny, 24 °C in Paris.");
    expect(out.toolCallLog).toEqual([
      {
        iteration: 0,
        toolName: "weather",
        toolInput: { city: "Paris" },
        toolOutput: { city: "Paris", sky: "sunny", celsius: 24 },
      },
    ]);
  });
});

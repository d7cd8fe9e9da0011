import { describe, expect, it } from "vitest";
import { subAgentsExample } from "../../examples/sub-agents.ts";

describe("examples/sub-agents.ts", () => {
  it("runs the researcher as a child run of the planner's tool call", async () => {
    const { out, runs } = await subAgentsExample();
    expect(out.content).toBe("Go in May. (Lisbon: mild in May, 22 °C, little rain.)");
    expect(runs.sort()).toEqual(["trip-1", "trip-1/planner#turn:0:tool:0"]);
    expect(out.toolCallLog).toEqual([
      {
        iteration: 0,
        toolName: "research",
        toolInput: { prompt: "Weather in Lisbon in May?" },
        toolOutput: "Lisbon: mild in May, 22 °C, little rain.",
      },
    ]);
  });
});

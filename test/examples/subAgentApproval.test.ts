import { describe, expect, it } from "vitest";
import { subAgentApprovalExample } from "../../examples/sub-agent-approval.ts";

describe("examples/sub-agent-approval.ts", () => {
  it("stops the concierge for its booker's approval, answers it on the booker's run, resumes both; cancels a chain", async () => {
    const { reason, pending, out, cancelled } = await subAgentApprovalExample();
    expect(reason).toBe("approval-pending");
    expect(pending).toMatchObject({
      runId: "evening-1/concierge#turn:0:tool:0",
      stepId: "booker#turn:0:tool:0",
      toolName: "book",
      input: { table: 2, at: "20:00" },
      parent: { runId: "evening-1", stepId: "concierge#turn:0:tool:0" },
      rootRunId: "evening-1",
    });
    expect(out.content).toBe("Your evening is set.");
    expect(out.toolCallLog).toEqual([
      {
        iteration: 0,
        toolName: "booking",
        toolInput: { prompt: "A table for 2 at 8pm" },
        toolOutput: 'Booked {"confirmation":"T-42"}',
      },
    ]);
    expect(cancelled).toEqual({
      status: "cancelled",
      subRuns: [{ runId: "evening-2/concierge#turn:0:tool:0", status: "cancelled" }],
    });
  });
});

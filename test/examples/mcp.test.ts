import { describe, expect, it } from "vitest";
import { mcpExample } from "../../examples/mcp.ts";

describe("examples/mcp.ts", () => {
  it("resumes a run with its MCP server gone: the server was reached once, by the first process", async () => {
    const lines: unknown[][] = [];
    const { out, connects } = await mcpExample((...args) => lines.push(args));
    expect(lines[0]).toEqual(["stopped: max-iterations"]);
    expect(connects).toBe(1);
    expect(out.content).toBe("Order A-17 shipped on Monday.");
    expect(out.toolCallLog).toMatchObject([
      { iteration: 0, toolName: "order_status", toolInput: { order: "A-17" }, status: "ok" },
    ]);
  });
});

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { agentLoop$, type ModelResponse } from "../../src/index.ts";
import { mcpTools } from "../../src/mcp.ts";
import { jsonJournal } from "../support/loop.ts";
import { recordingModel, stdioServer } from "./support.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-mcp-stdio-"));
const spawned: number[] = [];
afterAll(() => {
  for (const pid of spawned) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {} // gone already
  }
  rmSync(dir, { recursive: true, force: true });
});

const turn0: ModelResponse = {
  toolCalls: [
    { id: "c1", name: "add", input: { a: 20, b: 22 } },
    { id: "c2", name: "fail", input: { why: "quota exceeded" } },
    { id: "c3", name: "stats", input: { values: [2, 4] } },
  ],
};

describe("mcpTools against a real MCP server over stdio (a child process)", () => {
  it("survives the server's death: a resume tells the model the same tools, serves the journaled calls, and starts a server only for a new call", async () => {
    const callsFile = join(dir, "calls.txt");
    writeFileSync(callsFile, "");
    const connect = async () => {
      const server = await stdioServer(callsFile);
      spawned.push(server.pid ?? -1);
      return server.client;
    };
    const journal = jsonJournal();
    const loop = (script: readonly ModelResponse[], maxIterations?: number) => {
      const model = recordingModel(script);
      // A person approves each `add` (so the run waits between its model call and the new call).
      const source = mcpTools(connect, { server: "calculator", tools: { add: { requiresApproval: true } } });
      return { model, loop: agentLoop$({ id: "calc", model, toolSources: [source], maxIterations }) };
    };

    // Process 1: turn 0's three calls run against the server, then the run stops (iteration limit).
    const first = loop([turn0], 1);
    const approvals = { "calc#turn:0:tool:0": true };
    const stopped = await first.loop.run({ runId: "r", journal, input: "sums", approvals }).catch((e) => e);
    expect(stopped.run?.reason).toBe("max-iterations");
    expect(spawned).toHaveLength(1);
    process.kill(spawned[0] as number, "SIGKILL"); // the server dies with the process that used it
    const served = () => readFileSync(callsFile, "utf8").split("\n").filter(Boolean).sort(); // calls run concurrently
    expect(served()).toEqual(["add", "fail", "stats"]);

    // Process 2: the model is called with the journaled results and asks for a new call, which waits
    // for its approval; no server is started.
    const turn1: ModelResponse = { toolCalls: [{ id: "c4", name: "add", input: { a: 1, b: 41 } }] };
    const second = loop([turn0, turn1]);
    const again = await second.loop.run({ runId: "r", journal }).catch((e) => e);
    expect(again.run?.reason).toBe("approval-pending");
    expect(second.model.calls).toBe(1);
    expect(second.model.told[0]).toEqual(first.model.told[0]);
    expect(second.model.told[0]?.map((t) => t.name)).toEqual(["add", "fail", "stats", "hang"]);
    expect(spawned).toHaveLength(1);

    // Process 3: approved, turn 1's call is new, so a server is started, and only that call reaches it.
    const third = loop([turn0, turn1, { content: "42", toolCalls: [] }]);
    const out = await third.loop.run({ runId: "r", journal, approvals: { "calc#turn:1:tool:0": true } });
    expect(out.content).toBe("42");
    expect(spawned).toHaveLength(2);
    expect(served()).toEqual(["add", "add", "fail", "stats"]);
    expect(out.toolCallLog.map((s) => s.toolOutput)).toEqual([
      { content: [{ type: "text", text: "42" }] },
      { error: "McpToolError", message: "quota exceeded" },
      { content: [{ type: "text", text: '{"sum":6,"mean":3}' }], structuredContent: { sum: 6, mean: 3 } },
      { content: [{ type: "text", text: "42" }] },
    ]);
  });
});

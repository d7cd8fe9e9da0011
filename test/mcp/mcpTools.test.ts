import { afterEach, describe, expect, it } from "vitest";
import { isAgentLoopConfigError, isDefinitionChangedError, isToolSourceError } from "../../src/core/errors.ts";
import { readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import { agentLoop$, type ModelResponse, type Tool } from "../../src/index.ts";
import { idempotencyKey } from "../../src/journal.ts";
import type { McpClient, McpToolsOptions } from "../../src/mcp/tools.ts";
import { mcpTools } from "../../src/mcp.ts";
import { jsonJournal } from "../support/loop.ts";
import { inMemoryServer, recordingModel } from "./support.ts";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c().catch(() => {})));
});

/** A fresh in-memory server; its calls go to `calls`, their requests' `_meta` to `metas`. */
async function serve(calls: string[], metas: (Readonly<Record<string, unknown>> | undefined)[] = []) {
  const s = await inMemoryServer(calls, metas);
  closers.push(s.close);
  return s;
}

/** A client factory that counts how often the server had to be reached. */
function counted(connect: () => Promise<McpClient>) {
  const factory = Object.assign(
    async () => {
      factory.connects++;
      return connect();
    },
    { connects: 0 },
  );
  return factory;
}

const call = (id: string, name: string, input: unknown) => ({ id, name, input });
const turn0: ModelResponse = {
  toolCalls: [
    call("c1", "add", { a: 2, b: 3 }),
    call("c2", "fail", { why: "no such account" }),
    call("c3", "stats", { values: [1, 2, 6] }),
  ],
};

function calculatorLoop(
  client: Parameters<typeof mcpTools>[0],
  script: readonly ModelResponse[],
  more: { options?: Partial<McpToolsOptions>; maxIterations?: number; tools?: Record<string, Tool> } = {},
) {
  const model = recordingModel(script);
  const loop = agentLoop$({
    id: "calc",
    model,
    ...(more.tools ? { tools: more.tools } : {}),
    toolSources: [mcpTools(client, { server: "calculator", ...more.options })],
    searchTools: false,
    ...(more.maxIterations ? { maxIterations: more.maxIterations } : {}),
  });
  return { loop, model };
}

/** Runs turn 0 (the three calls) and stops at the iteration limit: the first process's life. */
async function firstProcess(journal: Journal, client: Parameters<typeof mcpTools>[0], runId = "r") {
  const { loop, model } = calculatorLoop(client, [turn0], { maxIterations: 1 });
  const stopped = await loop.run({ runId, journal, input: "2+3? and fail, and stats" }).catch((e) => e);
  expect(stopped.run?.reason).toBe("max-iterations");
  return model;
}

describe("mcpTools over the SDK's in-memory transport", () => {
  it("tells the model the server's tools, calls them as frames, feeds isError back as a failure and keeps structured content", async () => {
    const calls: string[] = [];
    const { client } = await serve(calls);
    const { loop, model } = calculatorLoop(client, [turn0, { content: "5", toolCalls: [] }]);
    const journal = jsonJournal();
    const out = await loop.run({ runId: "r", journal, input: "2+3?" });

    expect(out.content).toBe("5");
    expect(calls.sort()).toEqual(["add", "fail", "stats"]);
    expect(model.told[0]?.map((t) => t.name)).toEqual(["add", "fail", "stats", "hang"]);
    expect(model.told[0]?.[0]).toMatchObject({
      description: "Adds two numbers",
      inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
    });
    expect(out.toolCallLog).toEqual([
      {
        iteration: 0,
        toolName: "add",
        toolInput: { a: 2, b: 3 },
        toolOutput: { content: [{ type: "text", text: "5" }] },
      },
      {
        iteration: 0,
        toolName: "fail",
        toolInput: { why: "no such account" },
        toolOutput: { error: "McpToolError", message: "no such account" },
      },
      {
        iteration: 0,
        toolName: "stats",
        toolInput: { values: [1, 2, 6] },
        toolOutput: {
          content: [{ type: "text", text: '{"sum":9,"mean":3}' }],
          structuredContent: { sum: 9, mean: 3 },
        },
      },
    ]);
    // The model was fed the failure as an error result.
    const toolMessages = (await readJournal(journal, "r")).filter((e) => e.type === "frame.completed");
    expect(toolMessages.filter((e) => (e.data as { failed?: boolean }).failed)).toHaveLength(1);
  });

  it("journals the server's list once, as the decision <loop>#tools:<server>, with the run's start", async () => {
    const { client } = await serve([]);
    const journal = jsonJournal();
    await calculatorLoop(client, [{ content: "hi", toolCalls: [] }]).loop.run({ runId: "r", journal, input: "hi" });
    const entries = await readJournal(journal, "r");
    const lists = entries.filter((e) => e.type === "decision.recorded" && e.data.source === "tool-list");
    expect(lists).toHaveLength(1);
    expect(lists[0]?.seq).toBe(2); // in run.started's append: no run exists without its tools
    expect(lists[0]?.data).toMatchObject({
      decisionId: "calc#tools:calculator",
      choice: { source: "calculator", tools: [{ name: "add" }, { name: "fail" }, { name: "stats" }, { name: "hang" }] },
    });
    const started = entries[0]?.data as { definition?: { sources?: string[] } };
    expect(started.definition?.sources).toEqual(["calculator"]);
  });

  it("resumes with the server gone: the same tools told, journaled calls served, the server never reached", async () => {
    const calls: string[] = [];
    const first = await serve(calls);
    const journal = jsonJournal();
    const before = await firstProcess(journal, first.client);
    await first.close(); // the server is gone

    const connect = counted(() => Promise.reject(new Error("the server is gone")));
    const { loop, model } = calculatorLoop(connect, [turn0, { content: "5, and 9 in all", toolCalls: [] }]);
    const out = await loop.run({ runId: "r", journal });

    expect(out.content).toBe("5, and 9 in all");
    expect(connect.connects).toBe(0);
    expect(calls.sort()).toEqual(["add", "fail", "stats"]); // each ran once, in the first process
    expect(model.calls).toBe(1); // turn 0 served from the journal
    expect(model.told[0]).toEqual(before.told[0]);
    expect(out.toolCallLog.map((s) => s.toolName)).toEqual(["add", "fail", "stats"]);
  });

  it("reaches the server on a resume only when a new call must be made, and runs only that call", async () => {
    const calls: string[] = [];
    const first = await serve(calls);
    const journal = jsonJournal();
    await firstProcess(journal, first.client);
    await first.close();

    const later: string[] = [];
    const connect = counted(async () => (await serve(later)).client);
    const script = [turn0, { toolCalls: [call("c4", "add", { a: 5, b: 9 })] }, { content: "14", toolCalls: [] }];
    const out = await calculatorLoop(connect, script).loop.run({ runId: "r", journal });

    expect(out.content).toBe("14");
    expect(connect.connects).toBe(1);
    expect(later).toEqual(["add"]);
    expect(out.toolCallLog[3]?.toolOutput).toEqual({ content: [{ type: "text", text: "14" }] });
  });

  it("feeds a protocol error (the server unreachable for a new call) back to the model as the call's failure", async () => {
    const first = await serve([]);
    const journal = jsonJournal();
    await firstProcess(journal, first.client);
    await first.close();

    const script = [turn0, { toolCalls: [call("c4", "add", { a: 1, b: 1 })] }, { content: "it failed", toolCalls: [] }];
    const out = await calculatorLoop(() => Promise.reject(new Error("connect ECONNREFUSED")), script).loop.run({
      runId: "r",
      journal,
    });
    expect(out.content).toBe("it failed");
    expect(out.toolCallLog[3]?.toolOutput).toEqual({ error: "Error", message: "connect ECONNREFUSED" });
  });

  it("feeds the SDK's errors back as failures: a closed connection, and arguments the server refuses", async () => {
    const first = await serve([]);
    const journal = jsonJournal();
    await firstProcess(journal, first.client);
    await first.close(); // the same Client object, now closed: the SDK throws "Not connected"

    const turn1: ModelResponse = {
      toolCalls: [call("c4", "add", { a: 1, b: 1 })],
    };
    const closed = calculatorLoop(first.client, [turn0, turn1], { maxIterations: 2 });
    const stopped = await closed.loop.run({ runId: "r", journal }).catch((e) => e);
    expect(stopped.run?.toolCallLog[3]?.toolOutput).toEqual({ error: "Error", message: "Not connected" });

    const { client } = await serve([]);
    const script = [{ toolCalls: [call("c1", "add", { a: "one", b: 1 })] }, { content: "x", toolCalls: [] }];
    const out = await calculatorLoop(client, script).loop.run({ runId: "r2", journal, input: "x" });
    expect(out.toolCallLog[0]?.toolOutput).toMatchObject({
      error: "McpToolError",
      message: expect.stringContaining("Invalid arguments for tool add"),
    });
  });

  it("applies onUnknownOutcome: a call cut off mid-way is not sent twice with 'fail', and is with the default 'retry'", async () => {
    for (const onUnknownOutcome of ["fail", "retry"] as const) {
      const calls: string[] = [];
      const first = await serve(calls);
      const journal = jsonJournal();
      const stop = new AbortController();
      const script = [{ toolCalls: [call("c1", "hang", { id: "x" })] }, { content: "done", toolCalls: [] }];
      const hung = calculatorLoop(first.client, script);
      const running = hung.loop.run({ runId: "r", journal, input: "hang", signal: stop.signal }).catch((e) => e);
      while (!calls.includes("hang")) await new Promise((r) => setTimeout(r, 5));
      stop.abort(); // the process stops mid-call: the frame is started, its outcome unknown
      expect((await running).run?.reason).toBe("aborted");
      await first.close();

      const later: string[] = [];
      const connect = counted(async () => (await serve(later)).client);
      const options = { tools: { hang: { onUnknownOutcome, timeoutMs: 200 } } };
      const out = await calculatorLoop(connect, script, { options }).loop.run({ runId: "r", journal });
      if (onUnknownOutcome === "fail") {
        expect(connect.connects).toBe(0);
        expect(out.toolCallLog[0]?.toolOutput).toMatchObject({ error: "outcome-unknown" });
      } else {
        expect(later).toEqual(["hang"]); // sent again, and timed out this time
        expect(out.toolCallLog[0]?.toolOutput).toMatchObject({ error: "TimeoutError" });
      }
    }
  });

  it("sends the server the run id and an idempotency key per run and step: another run, another key; a resume, the same", async () => {
    const metas: (Readonly<Record<string, unknown>> | undefined)[] = [];
    const { client } = await serve([], metas);
    const journal = jsonJournal();
    const script = [{ toolCalls: [call("c1", "add", { a: 2, b: 3 })] }, { content: "5", toolCalls: [] }];
    for (const runId of ["order-1042", "order-1043"]) {
      await calculatorLoop(client, script).loop.run({ runId, journal, input: "2+3?" });
    }
    const step = "calc#turn:0:tool:0";
    expect(metas).toEqual([
      { "loom/stepId": step, "loom/runId": "order-1042", "loom/idempotencyKey": idempotencyKey("order-1042", step) },
      { "loom/stepId": step, "loom/runId": "order-1043", "loom/idempotencyKey": idempotencyKey("order-1043", step) },
    ]);
    expect(metas[0]?.["loom/idempotencyKey"]).not.toBe(metas[1]?.["loom/idempotencyKey"]);

    // A call cut off mid-way and sent again by a resume carries the key it was first sent with.
    const hung: (Readonly<Record<string, unknown>> | undefined)[] = [];
    const calls: string[] = [];
    const first = await serve(calls, hung);
    const stop = new AbortController();
    const hangs = [{ toolCalls: [call("c1", "hang", { id: "x" })] }, { content: "done", toolCalls: [] }];
    const running = calculatorLoop(first.client, hangs)
      .loop.run({ runId: "order-1044", journal, input: "hang", signal: stop.signal })
      .catch((e) => e);
    while (!calls.includes("hang")) await new Promise((r) => setTimeout(r, 5));
    stop.abort();
    expect((await running).run?.reason).toBe("aborted");
    const second = await serve([], hung);
    const options = { tools: { hang: { timeoutMs: 100 } } };
    await calculatorLoop(second.client, hangs, { options }).loop.run({ runId: "order-1044", journal });
    expect(hung).toHaveLength(2);
    expect(hung[1]).toEqual(hung[0]);
    expect(hung[0]?.["loom/idempotencyKey"]).toBe(idempotencyKey("order-1044", step));
  });

  it("keeps the journaled list when the server's tools change: the run goes on with the tools it started with", async () => {
    const journal = jsonJournal();
    const before = await firstProcess(journal, (await serve([])).client);
    const shrunk: McpClient = {
      listTools: async () => ({ tools: [{ name: "other", inputSchema: { type: "object" } }] }),
      callTool: async () => ({ content: [] }),
    };
    const { loop, model } = calculatorLoop(shrunk, [turn0, { content: "ok", toolCalls: [] }]);
    await loop.run({ runId: "r", journal });
    expect(model.told[0]).toEqual(before.told[0]);
  });

  it("refuses a resume under another server name with DefinitionChangedError, before any append", async () => {
    const journal = jsonJournal();
    await firstProcess(journal, (await serve([])).client);
    const length = (await readJournal(journal, "r")).length;
    const { loop } = calculatorLoop((await serve([])).client, [turn0], { options: { server: "calc2" } });
    const e = await loop.run({ runId: "r", journal }).catch((x) => x);
    expect(isDefinitionChangedError(e)).toBe(true);
    expect(e.message).toContain('tool source "calc2" added; tool source "calculator" removed');
    expect(await readJournal(journal, "r")).toHaveLength(length);
  });

  it("refuses a tool name the loop already has (toolNameClash), and a prefix keeps them apart", async () => {
    const { client } = await serve([]);
    const add: Tool = { description: "local add", execute: () => 0 };
    const journal = jsonJournal();
    const clash = calculatorLoop(client, [{ content: "x", toolCalls: [] }], { tools: { add } });
    const e = await clash.loop.run({ runId: "r", journal, input: "x" }).catch((x) => x);
    expect(isAgentLoopConfigError(e) && e.code).toBe("toolNameClash");
    expect(e.message).toContain('tool source "calculator" has a tool named "add"');
    expect(await readJournal(journal, "r")).toEqual([]);

    const script = [{ toolCalls: [call("c1", "calc_add", { a: 1, b: 2 })] }, { content: "3", toolCalls: [] }];
    const prefixed = calculatorLoop(client, script, { tools: { add }, options: { prefix: "calc_" } });
    const out = await prefixed.loop.run({ runId: "r2", journal, input: "1+2" });
    expect(prefixed.model.told[0]?.map((t) => t.name)).toEqual([
      "add",
      "calc_add",
      "calc_fail",
      "calc_stats",
      "calc_hang",
    ]);
    expect(out.toolCallLog[0]?.toolOutput).toEqual({ content: [{ type: "text", text: "3" }] });
  });

  it("throws ToolSourceError when the server cannot list its tools at the run's start, journaling nothing", async () => {
    const journal = jsonJournal();
    const { loop } = calculatorLoop(() => Promise.reject(new Error("spawn ENOENT")), [turn0]);
    const e = await loop.run({ runId: "r", journal, input: "x" }).catch((x) => x);
    expect(isToolSourceError(e)).toBe(true);
    expect(e.message).toContain('run r: tool source "calculator": listing its tools failed: spawn ENOENT');
    expect(await readJournal(journal, "r")).toEqual([]);
  });

  it("settles a non-object input as invalid without reaching the server", async () => {
    const calls: string[] = [];
    const { client } = await serve(calls);
    const script = [{ toolCalls: [call("c1", "add", [1, 2])] }, { content: "x", toolCalls: [] }];
    const out = await calculatorLoop(client, script).loop.run({ runId: "r", journal: jsonJournal(), input: "x" });
    expect(calls).toEqual([]);
    expect(out.toolCallLog[0]?.toolOutput).toMatchObject({ error: "invalid-input" });
  });
});

import { spawn } from "node:child_process";
import { join } from "node:path";
import type { LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import { SpanStatusCode } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, it } from "vitest";
import { fromAiSdk } from "../../src/ai-sdk/aiSdk.ts";
import {
  agentLoop$,
  createJournal,
  isAgentInterruptedError,
  type ModelResponse,
  memoryStore,
  openSqliteJournal,
  readJournal,
  rebuildToolCallLog,
  scriptedModel,
} from "../../src/index.ts";
import { otelTelemetry } from "../../src/otel.ts";
import { tempDir } from "../cli/support.ts";
import { streamedAs } from "../support/aiSdkStream.ts";

/** Spans of runs, after the GenAI conventions, one trace across a crash; none for served steps. */
function traced() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { exporter, telemetry: otelTelemetry({ tracer: provider.getTracer("loom-test") }) };
}

const script: ModelResponse[] = [
  {
    content: "checking",
    toolCalls: [{ id: "call-a", name: "lookup", input: { order: 7 } }],
    usage: { inputTokens: 120, outputTokens: 9 },
  },
  { content: "Order 7 ships today.", toolCalls: [], usage: { inputTokens: 160, outputTokens: 7 } },
];
const lookup = { description: "looks up", execute: async () => ({ status: "shipped" }) };
const named = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);
const id = (s: ReadableSpan) => s.spanContext().spanId;

describe("loom-agent/otel", () => {
  it("a run is an invoke_agent span; each model call a chat span and each tool call an execute_tool span under it", async () => {
    const { exporter, telemetry } = traced();
    const journal = createJournal({ store: memoryStore() });
    const model = { ...scriptedModel(script), id: "gpt-test" };
    const loop = agentLoop$({ id: "support", model, tools: { lookup }, telemetry, toolCallLog: "lean" });
    await loop.run({ runId: "r-1", input: "where is order 7?", journal });
    const spans = exporter.getFinishedSpans();
    const [root] = named(spans, "invoke_agent support");
    expect(root?.parentSpanContext).toBeUndefined();
    expect(root?.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.id": "support",
      "gen_ai.conversation.id": "r-1",
      "loom.outcome": "completed",
    });
    const chats = named(spans, "chat gpt-test");
    expect(chats).toHaveLength(2);
    expect(chats[0]?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "gpt-test",
      "gen_ai.conversation.id": "r-1",
      "gen_ai.usage.input_tokens": 120,
      "gen_ai.usage.output_tokens": 9,
      "loom.step.id": "support#turn:0:model",
      "loom.attempt": 1,
    });
    const [tool] = named(spans, "execute_tool lookup");
    const [lean] = await rebuildToolCallLog(journal, "r-1", "lean");
    expect(tool?.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "lookup",
      "gen_ai.tool.call.id": "call-a",
      "loom.step.id": "support#turn:0:tool:0",
      "loom.log.digest": lean?.digest,
    });
    for (const child of [...chats, tool]) {
      expect(child?.parentSpanContext?.spanId).toBe(id(root as ReadableSpan));
      expect(child?.spanContext().traceId).toBe(root?.spanContext().traceId);
    }
    // The trace context is journaled once, naming the root span.
    const entries = await readJournal(journal, "r-1");
    const trace = entries.find((e) => e.type === "decision.recorded" && e.data.decisionId === "support#trace");
    expect(trace?.data).toMatchObject({
      choice: { carrier: { traceparent: `00-${root?.spanContext().traceId}-${id(root as ReadableSpan)}-01` } },
    });
  });

  it("puts the model's finish reason on its chat span (gen_ai.response.finish_reasons), from the journaled response", async () => {
    const { exporter, telemetry } = traced();
    const usage = {
      inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 5, text: 5, reasoning: undefined },
    };
    const results: LanguageModelV3GenerateResult[] = [
      {
        content: [{ type: "tool-call", toolCallId: "m1", toolName: "lookup", input: '{"order":7}' }],
        finishReason: { unified: "tool-calls", raw: "tool_use" },
        usage,
        warnings: [],
      },
      {
        content: [{ type: "text", text: "Order 7 ships today." }],
        finishReason: { unified: "length", raw: "max_tokens" },
        usage,
        warnings: [],
      },
    ];
    let turn = 0;
    const model = fromAiSdk(new MockLanguageModelV3({ doGenerate: async () => results[turn++] as never }));
    const journal = createJournal({ store: memoryStore({ json: true }) });
    const loop = agentLoop$({ id: "support", model, tools: { lookup }, telemetry });
    await loop.run({ runId: "r-f", input: "where is order 7?", journal });
    const chats = exporter.getFinishedSpans().filter((s) => s.attributes["gen_ai.operation.name"] === "chat");
    expect(chats.map((s) => s.attributes["gen_ai.response.finish_reasons"])).toEqual([["tool-calls"], ["length"]]);
    // Journaled with the response, so every reader of the run (viewer, story, a resume) has it too.
    const responses = (await readJournal(journal, "r-f")).flatMap((e) =>
      e.type === "frame.completed" && e.data.frameId.endsWith(":model") ? [e.data.output] : [],
    );
    expect(responses).toMatchObject([{ finishReason: "tool-calls" }, { finishReason: "length" }]);
  });

  it("a failed model attempt ends its chat span with an error and an exception event; the retry is attempt 2", async () => {
    const { exporter, telemetry } = traced();
    let calls = 0;
    const model = {
      async generate() {
        if (calls++ === 0) throw Object.assign(new Error("overloaded"), { statusCode: 503 });
        return script[1] as ModelResponse;
      },
    };
    const loop = agentLoop$({
      id: "r",
      model,
      telemetry,
      retry: { model: { maxAttempts: 2, initialDelayMs: 0, jitter: 0 } },
    });
    await loop.run({ runId: "r-2", input: "hi", journal: createJournal({ store: memoryStore() }) });
    const chats = named(exporter.getFinishedSpans(), "chat");
    expect(chats.map((s) => s.attributes["loom.attempt"])).toEqual([1, 2]);
    expect(chats[0]?.status.code).toBe(SpanStatusCode.ERROR);
    expect(chats[0]?.events.map((e) => e.name)).toContain("exception");
    expect(chats[0]?.attributes["http.response.status_code"]).toBe(503);
    expect(chats[1]?.status.code).not.toBe(SpanStatusCode.ERROR);
  });

  it("a doStream-only AI SDK model answers a run watched by telemetry alone (one streaming rule, issue 36)", async () => {
    const { exporter, telemetry } = traced();
    const usage = (output: number) => ({
      inputTokens: { total: 100, noCache: 100, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: output, text: output, reasoning: undefined },
    });
    const mock = new MockLanguageModelV3({
      doStream: [
        streamedAs({
          content: [{ type: "tool-call", toolCallId: "call-a", toolName: "lookup", input: '{"order":7}' }],
          finishReason: { unified: "tool-calls", raw: undefined },
          usage: usage(9),
        }),
        streamedAs({
          content: [{ type: "text", text: "Order 7 ships today." }],
          finishReason: { unified: "stop", raw: undefined },
          usage: usage(7),
        }),
      ],
    });
    const loop = agentLoop$({ id: "s", model: fromAiSdk(mock), tools: { lookup }, telemetry, searchTools: false });
    const journal = createJournal({ store: memoryStore() });
    const out = await loop.run({ runId: "r-s", input: "where is order 7?", journal });
    expect(out.content).toBe("Order 7 ships today.");
    expect(mock.doStreamCalls).toHaveLength(2);
    expect(mock.doGenerateCalls).toHaveLength(0);
    const chats = named(exporter.getFinishedSpans(), "chat mock-model-id");
    expect(chats.map((s) => s.status.code)).toEqual([SpanStatusCode.UNSET, SpanStatusCode.UNSET]);
    expect(chats[1]?.attributes["gen_ai.usage.output_tokens"]).toBe(7);
  });

  it("a resume continues the trace (its run span's parent is the first attempt's) and makes no span for served steps", async () => {
    const journal = createJournal({ store: memoryStore() });
    const first = traced();
    const asks = { ...lookup, requiresApproval: true };
    const stopped = await agentLoop$({
      id: "a",
      model: scriptedModel(script),
      tools: { lookup: asks },
      telemetry: first.telemetry,
    })
      .run({ runId: "r-3", input: "refund?", journal })
      .catch((e) => e);
    expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("approval-pending");
    const [firstRoot] = named(first.exporter.getFinishedSpans(), "invoke_agent a");
    expect(firstRoot?.attributes["loom.outcome"]).toBe("interrupted (approval-pending)");

    const second = traced(); // another process: another tracer and exporter
    await agentLoop$({
      id: "a",
      model: scriptedModel(script),
      tools: { lookup: asks },
      telemetry: second.telemetry,
    }).run({
      runId: "r-3",
      journal,
      approvals: { "a#turn:0:tool:0": true },
    });
    const spans = second.exporter.getFinishedSpans();
    const [root] = named(spans, "invoke_agent a");
    expect(root?.spanContext().traceId).toBe(firstRoot?.spanContext().traceId);
    expect(root?.parentSpanContext?.spanId).toBe(id(firstRoot as ReadableSpan));
    expect(root?.attributes["loom.resumed"]).toBe(true);
    // Turn 0's model call was served from the journal: only turn 1's chat, and the approved tool call.
    expect(named(spans, "chat").map((s) => s.attributes["loom.step.id"])).toEqual(["a#turn:1:model"]);
    expect(named(spans, "execute_tool lookup")).toHaveLength(1);
    const traces = (await readJournal(journal, "r-3")).filter(
      (e) => e.type === "decision.recorded" && e.data.decisionId === "a#trace",
    );
    expect(traces).toHaveLength(1);
  });

  it("a tool re-run on resume (its outcome unknown) keeps the call id of the journaled model response", async () => {
    const journal = createJournal({ store: memoryStore({ json: true }) });
    const controller = new AbortController();
    let runs = 0;
    const slow = {
      description: "hangs until aborted the first time",
      execute: (_: unknown, { signal }: { signal: AbortSignal }) => {
        runs++;
        if (runs > 1) return { status: "shipped" };
        return new Promise((_, reject) => {
          signal.addEventListener("abort", () => reject(new Error("stopped")));
          setTimeout(() => controller.abort(), 5);
        });
      },
    };
    const first = traced();
    const stopped = await agentLoop$({
      id: "u",
      model: scriptedModel(script),
      tools: { lookup: slow },
      telemetry: first.telemetry,
    })
      .run({ runId: "r-5", input: "where is order 7?", journal, signal: controller.signal })
      .catch((e) => e);
    expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("aborted");
    const types = (await readJournal(journal, "r-5")).map((e) => e.type);
    expect(types.slice(-2)).toEqual(["frame.started", "run.interrupted"]);

    const second = traced(); // a fresh process: it never saw turn 0's model response as an event
    await agentLoop$({
      id: "u",
      model: scriptedModel(script),
      tools: { lookup: slow },
      telemetry: second.telemetry,
    }).run({
      runId: "r-5",
      journal,
    });
    expect(runs).toBe(2);
    const [rerun] = named(second.exporter.getFinishedSpans(), "execute_tool lookup");
    expect(rerun?.attributes).toMatchObject({
      "gen_ai.tool.call.id": "call-a",
      "loom.step.id": "u#turn:0:tool:0",
      "loom.rerun": true,
    });
  });

  it("a run killed mid-tool and resumed in a second process lands in the same trace", async () => {
    const dir = tempDir("loom-otel-");
    const file = join(dir, "traced.db");
    const worker = join(import.meta.dirname, "worker.ts");
    const run = (mode: string, kill: boolean) =>
      new Promise<string[]>((resolve, reject) => {
        const child = spawn(process.execPath, ["--import", "tsx", worker, file, mode], {
          cwd: join(import.meta.dirname, "../.."),
          stdio: ["ignore", "pipe", "pipe"],
        });
        const lines: string[] = [];
        let err = "";
        child.stderr.on("data", (c) => (err += c));
        child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
          for (const line of chunk.split("\n").filter(Boolean)) {
            lines.push(line);
            if (kill && line === "in-tool") child.kill("SIGKILL");
          }
        });
        child.on("error", reject);
        child.on("exit", (code, signal) =>
          kill || code === 0 ? resolve(lines) : reject(new Error(`worker ${mode} exited ${code ?? signal}: ${err}`)),
        );
      });
    const spansOf = (lines: string[]) =>
      lines
        .filter((l) => l.startsWith("span "))
        .map(
          (l) =>
            JSON.parse(l.slice(5)) as {
              name: string;
              traceId: string;
              parentSpanId?: string;
              attributes: Record<string, unknown>;
            },
        );
    const killed = spansOf(await run("first", true));
    const resumed = spansOf(await run("resume", false));
    // The killed process ended its first chat span before the tool; its run span never ended.
    expect(killed.map((s) => s.name)).toEqual(["chat"]);
    const journal = openSqliteJournal(file, { readonly: true });
    try {
      const decision = (await readJournal(journal, "t-1")).find(
        (e) => e.type === "decision.recorded" && e.data.decisionId === "traced#trace",
      );
      if (decision?.type !== "decision.recorded") throw new Error("no trace context was journaled");
      const { traceparent } = (decision.data.choice as { carrier: { traceparent: string } }).carrier;
      const [, traceId, rootId] = traceparent.split("-");
      expect(killed[0]?.traceId).toBe(traceId);
      const root = resumed.find((s) => s.name === "invoke_agent traced");
      expect(root?.traceId).toBe(traceId);
      expect(root?.parentSpanId).toBe(rootId);
      expect(resumed.every((s) => s.traceId === traceId)).toBe(true);
      // The resume re-ran the tool whose outcome was lost and asked the model once more; turn 0 was served.
      expect(resumed.filter((s) => s.name === "chat").map((s) => s.attributes["loom.step.id"])).toEqual([
        "traced#turn:1:model",
      ]);
      const reruns = resumed.filter((s) => s.name === "execute_tool lookup");
      expect(reruns).toHaveLength(1);
      expect(reruns[0]?.attributes).toMatchObject({ "gen_ai.tool.call.id": "c0", "loom.rerun": true });
    } finally {
      await journal.close();
    }
  }, 30_000);
});

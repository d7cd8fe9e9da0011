import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { MockLanguageModelV3 } from "ai/test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { fromAiSdk, providerName } from "../../src/ai-sdk/aiSdk.ts";
import { agentLoop$, createJournal, type ModelResponse, memoryStore, scriptedModel } from "../../src/index.ts";
import { redaction, withRedaction } from "../../src/journal.ts";
import { type OtelTelemetryOptions, otelTelemetry } from "../../src/otel.ts";

const script: ModelResponse[] = [
  {
    content: "checking",
    toolCalls: [{ id: "call-a", name: "lookup", input: { order: 7, card: "4111-1111" } }],
    usage: { inputTokens: 120, outputTokens: 9 },
  },
  { content: "Order 7 ships today.", toolCalls: [], usage: { inputTokens: 160, outputTokens: 7 } },
];
const lookup = { description: "looks up", execute: async () => ({ status: "shipped", secret: "s3cret" }) };

/** One run with spans and metrics kept in memory. */
async function observed(
  options: Omit<OtelTelemetryOptions, "tracer" | "meter"> = {},
  journal = createJournal({ store: memoryStore() }),
) {
  const spans = new InMemorySpanExporter();
  const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }).getTracer("t");
  const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 60_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const telemetry = otelTelemetry({ ...options, tracer, meter: meterProvider.getMeter("t") });
  const model = { ...scriptedModel(script), id: "gpt-test", provider: "openai" };
  await agentLoop$({ id: "support", model, tools: { lookup }, telemetry }).run({
    runId: "r-1",
    input: "where?",
    journal,
  });
  await reader.forceFlush();
  const finished = spans.getFinishedSpans();
  const points = metrics.getMetrics().flatMap((m) => m.scopeMetrics.flatMap((s) => s.metrics));
  await meterProvider.shutdown();
  return {
    root: finished.find((s) => s.name === "invoke_agent support"),
    chat: finished.filter((s) => s.name === "chat gpt-test"),
    tool: finished.find((s) => s.name === "execute_tool lookup"),
    metric: (name: string) => points.find((m) => m.descriptor.name === name),
  };
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("the GenAI conventions, old and latest", () => {
  it("keeps the conventions Loom emitted so far by default: gen_ai.agent.id on the run, the provider as gen_ai.system", async () => {
    vi.stubEnv("OTEL_SEMCONV_STABILITY_OPT_IN", "");
    const { root, chat } = await observed();
    expect(root?.attributes["gen_ai.agent.id"]).toBe("support");
    expect(root?.attributes["gen_ai.system"]).toBe("openai");
    expect(chat[0]?.attributes["gen_ai.system"]).toBe("openai");
    expect(chat[0]?.attributes["gen_ai.provider.name"]).toBeUndefined();
  });

  it("follows the latest ones under OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental: gen_ai.provider.name, no agent id on the internal run span", async () => {
    vi.stubEnv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental");
    const { root, chat } = await observed();
    expect(root?.attributes["gen_ai.agent.id"]).toBeUndefined();
    expect(root?.attributes["gen_ai.agent.name"]).toBe("support");
    expect(root?.attributes["gen_ai.provider.name"]).toBe("openai");
    expect(chat.map((s) => s.attributes["gen_ai.provider.name"])).toEqual(["openai", "openai"]);
    expect(chat[0]?.attributes["gen_ai.system"]).toBeUndefined();
  });

  it("lets the option choose over the variable, and refuses a version it does not know", async () => {
    vi.stubEnv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental");
    expect((await observed({ conventions: "v1.36" })).root?.attributes["gen_ai.agent.id"]).toBe("support");
    expect(() => otelTelemetry({ conventions: "v2" as never })).toThrow(/"latest" or "v1.36"/);
  });

  it("names providers as the conventions do, from the AI SDK's provider ids", () => {
    expect(providerName("openai.chat")).toBe("openai");
    expect(providerName("anthropic.messages")).toBe("anthropic");
    expect(providerName("amazon-bedrock")).toBe("aws.bedrock");
    expect(providerName("google.vertex.chat")).toBe("gcp.vertex_ai");
    expect(providerName("google.generative-ai")).toBe("gcp.gemini");
    const model = fromAiSdk(new MockLanguageModelV3({ provider: "anthropic.messages", modelId: "claude" }));
    expect(model).toMatchObject({ id: "claude", provider: "anthropic" });
  });
});

describe("the GenAI client metrics", () => {
  it("records each model call's duration and its input and output tokens", async () => {
    const { metric } = await observed();
    const duration = metric("gen_ai.client.operation.duration");
    expect(duration?.descriptor.unit).toBe("s");
    const durationPoints = duration?.dataPoints ?? [];
    expect(durationPoints).toHaveLength(1);
    expect(durationPoints[0]?.attributes).toEqual({
      "gen_ai.operation.name": "chat",
      "gen_ai.system": "openai",
      "gen_ai.request.model": "gpt-test",
    });
    expect((durationPoints[0]?.value as { count: number } | undefined)?.count).toBe(2);
    const tokens = metric("gen_ai.client.token.usage");
    const byType = Object.fromEntries(
      (tokens?.dataPoints ?? []).map((p) => [p.attributes["gen_ai.token.type"], (p.value as { sum: number }).sum]),
    );
    expect(byType).toEqual({ input: 280, output: 16 });
  });
});

describe("tool content on spans (opt-in)", () => {
  it("leaves the tool's arguments and result off spans unless asked", async () => {
    const { tool } = await observed();
    expect(tool?.attributes["gen_ai.tool.call.arguments"]).toBeUndefined();
    expect(tool?.attributes["gen_ai.tool.call.result"]).toBeUndefined();
  });

  it("puts them on when asked, as the journal keeps them: what a redaction removed stays off the span", async () => {
    const plain = await observed({ toolContent: true });
    expect(JSON.parse(plain.tool?.attributes["gen_ai.tool.call.arguments"] as string)).toEqual({
      order: 7,
      card: "4111-1111",
    });
    expect(JSON.parse(plain.tool?.attributes["gen_ai.tool.call.result"] as string)).toEqual({
      status: "shipped",
      secret: "s3cret",
    });

    const journal = withRedaction(
      createJournal({ store: memoryStore() }),
      redaction({ values: [/4111-1111/, /s3cret/] }),
    );
    const redacted = await observed({ toolContent: true }, journal);
    const args = redacted.tool?.attributes["gen_ai.tool.call.arguments"] as string;
    const result = redacted.tool?.attributes["gen_ai.tool.call.result"] as string;
    expect(args).toContain('"order":7');
    expect(args).not.toContain("4111-1111");
    expect(result).toContain("shipped");
    expect(result).not.toContain("s3cret");
  });
});

/**
 * What telemetry costs a run (issue 17): a 200-turn run (one 1.5–4 kB tool output a turn, memory
 * journal) without telemetry and with `otelTelemetry()` on a no-op tracer (no tracer provider
 * registered: what a program that loads Loom's telemetry but exports nothing pays), and with a
 * recording tracer (the SDK's, spans kept in memory). Runs interleaved; target: no-op ≤ 5% a turn.
 *
 *   node --import tsx bench/otel.ts
 */
import { trace } from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { createJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import { otelTelemetry } from "../src/otel.ts";
import type { AgentLoopConfig, Tool } from "../src/runtime/base/config.ts";
import type { RunTelemetry } from "../src/runtime/base/telemetry.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printResult, printTable, rng, toolOutput } from "./support.ts";

const TURNS = 200;
const REPEATS = 41;
const next = rng(17);
const outputs = Array.from({ length: TURNS }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));
const lookup: Tool = { description: "looks things up", execute: (input) => outputs[(input as { n: number }).n] };
const exporter = new InMemorySpanExporter();
const recording = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

const variants: [string, RunTelemetry | undefined][] = [
  ["no telemetry", undefined],
  ["otelTelemetry(), no-op tracer", otelTelemetry({ tracer: trace.getTracer("bench") })],
  ["otelTelemetry(), recording tracer", otelTelemetry({ tracer: recording.getTracer("bench") })],
];

function loopOf(telemetry: RunTelemetry | undefined) {
  const config: AgentLoopConfig = {
    id: "bench",
    model: scriptedModel(({ turn }) =>
      turn < TURNS
        ? { toolCalls: [{ id: `c${turn}`, name: "lookup", input: { n: turn } }] }
        : { content: "done", toolCalls: [] },
    ),
    tools: { lookup },
    maxIterations: TURNS + 1,
    ...(telemetry ? { telemetry } : {}),
  };
  return agentLoop$(config);
}

const times = new Map<string, number[]>(variants.map(([name]) => [name, []]));
for (let i = -3; i < REPEATS; i++) {
  for (const [name, telemetry] of i % 2 === 0 ? variants : [...variants].reverse()) {
    const loop = loopOf(telemetry);
    const t = performance.now();
    await loop.run({ runId: `r-${i}`, input: "go", journal: createJournal({ store: memoryStore() }) });
    if (i >= 0) (times.get(name) as number[]).push(performance.now() - t);
    exporter.reset();
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const best = (xs: number[]) => Math.min(...xs);
const base = median(times.get("no telemetry") as number[]);
const baseBest = best(times.get("no telemetry") as number[]);
printTable(
  `Telemetry's cost, a ${TURNS}-turn run on the memory journal (${REPEATS} runs each, interleaved)`,
  variants.map(([name]) => {
    const ms = median(times.get(name) as number[]);
    const min = best(times.get(name) as number[]);
    return {
      run: name,
      "µs/turn (median)": (ms / TURNS) * 1000,
      "× none (median)": ms / base,
      "µs/turn (best)": (min / TURNS) * 1000,
      "× none (best)": min / baseBest,
    };
  }),
);
const noop = median(times.get("otelTelemetry(), no-op tracer") as number[]) / base;
const recordingRatio = median(times.get("otelTelemetry(), recording tracer") as number[]) / base;
printResult("otel", {
  target: "no-op tracer ≤ 1.05× none a turn",
  noopVsNone: noop,
  recordingVsNone: recordingRatio,
  met: noop <= 1.05,
});

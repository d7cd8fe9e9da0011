/**
 * A traced run in its own process: `worker.ts <sqlite file> <first|resume>`. Spans are printed
 * as JSON lines as they end (`span {...}`). `first` starts the run and hangs in its tool after
 * printing `in-tool` (the test SIGKILLs it there); `resume` resumes it to its end.
 */
import { SpanStatusCode } from "@opentelemetry/api";
import { BasicTracerProvider, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { openSqliteJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { otelTelemetry } from "../../src/otel.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

const [file, mode] = process.argv.slice(2) as [string, "first" | "resume"];
const print = (span: ReadableSpan) => {
  const line = {
    name: span.name,
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
    parentSpanId: span.parentSpanContext?.spanId,
    attributes: span.attributes,
    error: span.status.code === SpanStatusCode.ERROR,
  };
  console.log(`span ${JSON.stringify(line)}`);
};
const provider = new BasicTracerProvider({
  spanProcessors: [
    new SimpleSpanProcessor({
      export: (spans, done) => {
        for (const span of spans) print(span);
        done({ code: 0 });
      },
      shutdown: async () => {},
    }),
  ],
});
const journal = openSqliteJournal(file);
const loop = agentLoop$({
  id: "traced",
  model: scriptedModel([
    { content: "looking", toolCalls: [{ id: "c0", name: "lookup", input: { n: 0 } }] },
    { content: "done", toolCalls: [] },
  ]),
  tools: {
    lookup: {
      description: "looks up",
      execute: async () => {
        if (mode === "first") {
          console.log("in-tool");
          await new Promise(() => {}); // killed here
        }
        return { found: true };
      },
    },
  },
  telemetry: otelTelemetry({ tracer: provider.getTracer("loom-test") }),
});
await loop.run({ runId: "t-1", journal, ...(mode === "first" ? { input: "go" } : {}) });
await journal.close();
console.log("done");

/**
 * `loom-agent/otel`: OpenTelemetry spans for runs, after the GenAI semantic conventions. A run is
 * an `invoke_agent` span, each model attempt a `chat` span and each tool call an `execute_tool`
 * span under it. Only work this process does makes spans: steps a resume serves from the journal
 * make none. The first attempt's span context is journaled (`<loop>#trace`), and every later
 * process's run span takes it as its parent, so a run that crashed and resumed elsewhere reads as
 * one trace. `@opentelemetry/api` is an optional peer; nothing else in Loom loads it.
 */
import {
  type Attributes,
  type Context,
  context,
  type Histogram,
  isSpanContextValid,
  type Meter,
  metrics,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { toolStepId } from "./events/ids.ts";
import type { JournalEntry, ToolCall } from "./events/types.ts";
import { StepDigests } from "./otel/stepDigests.ts";
import type { RunEvent } from "./projections/events.ts";
import type { RunTelemetry, RunTelemetryScope, TelemetryRunStart, TraceCarrier } from "./runtime/base/telemetry.ts";

export type {
  RunTelemetry,
  RunTelemetryScope,
  TelemetryRunStart,
  TraceCarrier,
} from "./runtime/base/telemetry.ts";

/** Options of {@link otelTelemetry}. */
export interface OtelTelemetryOptions {
  /** The tracer to make spans with; default `trace.getTracer("loom-agent")` (the global provider's). */
  readonly tracer?: Tracer;
  /**
   * Whether spans carry the digests of outputs (`loom.log.digest`, `loom.output.digest`; default
   * true). They are the journal's: where a redaction keyed its digests
   * (`redaction({ digest: { keys } })`), a redacted output's digest is the keyed one, so there is
   * no need to turn them off for that.
   */
  readonly logDigest?: boolean;
  /**
   * The meter for the GenAI client metrics, `gen_ai.client.operation.duration` (seconds, one per
   * model attempt) and `gen_ai.client.token.usage` (tokens, one per reported count, by
   * `gen_ai.token.type`); default `metrics.getMeter("loom-agent")` (the global provider's, which
   * records nothing until a meter provider is registered).
   */
  readonly meter?: Meter;
  /**
   * Which version of the GenAI conventions spans follow. `"latest"`: the current experimental
   * conventions (`gen_ai.provider.name`; no `gen_ai.agent.id` on the run's internal
   * `invoke_agent` span). `"v1.36"`: what Loom has emitted so far (`gen_ai.system`,
   * `gen_ai.agent.id`). Default: `"latest"` when `OTEL_SEMCONV_STABILITY_OPT_IN` lists
   * `gen_ai_latest_experimental`, as the conventions ask, else `"v1.36"`.
   */
  readonly conventions?: "latest" | "v1.36";
  /**
   * Opt in to tool spans carrying the call's arguments and result
   * (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`, JSON text), as the journal keeps
   * them: redacted where a redaction changed them, and a claim-check envelope for an output
   * stored as a blob. Off by default: they may hold what your users typed or your tools returned.
   */
  readonly toolContent?: boolean;
}

/** The conventions' opt-in variable's value that asks for the latest GenAI conventions. */
const LATEST_OPT_IN = "gen_ai_latest_experimental";

/** The conventions version spans follow: the option, else the opt-in variable. */
function conventionsOf(option: OtelTelemetryOptions["conventions"]): "latest" | "v1.36" {
  if (option !== undefined) {
    if (option !== "latest" && option !== "v1.36") {
      throw new TypeError(`otelTelemetry: conventions must be "latest" or "v1.36" (got ${String(option)})`);
    }
    return option;
  }
  const optIn = typeof process === "undefined" ? undefined : process.env.OTEL_SEMCONV_STABILITY_OPT_IN;
  return optIn?.split(",").some((v) => v.trim() === LATEST_OPT_IN) ? "latest" : "v1.36";
}

/** The two GenAI client metrics a run records. */
interface GenAiMetrics {
  readonly duration: Histogram;
  readonly tokens: Histogram;
}

function metricsOf(meter: Meter): GenAiMetrics {
  return {
    duration: meter.createHistogram("gen_ai.client.operation.duration", {
      description: "GenAI operation duration",
      unit: "s",
    }),
    tokens: meter.createHistogram("gen_ai.client.token.usage", {
      description: "Measures number of input and output tokens used",
      unit: "{token}",
    }),
  };
}

/**
 * Telemetry for `agentLoop$({ telemetry })` that makes OpenTelemetry spans. Register a tracer
 * provider with an exporter as usual (an OTLP exporter, say); Loom only uses `@opentelemetry/api`.
 *
 * Attributes: `gen_ai.operation.name` (`invoke_agent`, `chat`, `execute_tool`), `gen_ai.agent.id`,
 * `gen_ai.conversation.id` (the run id), `gen_ai.request.model`, `gen_ai.response.finish_reasons`,
 * `gen_ai.usage.input_tokens` / `output_tokens`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, and
 * `loom.step.id`, `loom.attempt`, `loom.log.digest` (the tool output's digest in the lean log;
 * `logDigest: false` leaves it out), and on model and tool spans the digests and sizes the
 * journal records of the call's input and output: `loom.input.digest`, `loom.input.bytes` (tool
 * calls), `loom.output.digest`, `loom.output.bytes`. A payload redacted under a key
 * (`redaction({ digest: { keys } })`) gets the journal's keyed digest or none, and no size.
 * A failed attempt ends its span with an error status and an `exception` event; a retry is a new
 * span with the next `loom.attempt`.
 *
 * @example
 * ```ts
 * import { otelTelemetry } from "loom-agent/otel";
 * const loop = agentLoop$({ id: "support", model, tools, telemetry: otelTelemetry() });
 * ```
 */
export function otelTelemetry(options: OtelTelemetryOptions = {}): RunTelemetry {
  const settings: SpanSettings = {
    logDigest: options.logDigest !== false,
    latest: conventionsOf(options.conventions) === "latest",
    toolContent: options.toolContent === true,
    metrics: metricsOf(options.meter ?? metrics.getMeter("loom-agent")),
  };
  return {
    startRun(run) {
      return new RunSpans(options.tracer ?? trace.getTracer("loom-agent"), run, settings);
    },
  };
}

/** What every run's spans are made with. */
interface SpanSettings {
  /** Whether spans carry output digests (`OtelTelemetryOptions.logDigest`). */
  readonly logDigest: boolean;
  /** The latest GenAI conventions (`OtelTelemetryOptions.conventions`). */
  readonly latest: boolean;
  readonly toolContent: boolean;
  readonly metrics: GenAiMetrics;
}

/** W3C `traceparent` of a span context: `00-<trace id>-<span id>-<flags>`. */
function traceparent(span: Span): string {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The context a journaled carrier names, as a remote parent; the active context when it names none. */
function parentOf(carrier: TraceCarrier | undefined): Context {
  const match = carrier?.traceparent ? TRACEPARENT.exec(carrier.traceparent) : null;
  if (!match) return context.active();
  const [, traceId, spanId, flags] = match as unknown as [string, string, string, string];
  return trace.setSpanContext(context.active(), {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16),
    isRemote: true,
  });
}

class RunSpans implements RunTelemetryScope {
  readonly carrier: TraceCarrier | undefined;
  /** Told each event while the run span records (a no-op tracer records nothing: then no events are made). */
  readonly onEvent?: (event: RunEvent) => void;
  /** Told each append's entries as the journal keeps them, before their events (while the run span records). */
  readonly onEntries?: (entries: readonly JournalEntry[]) => void;
  private readonly root: Span;
  private readonly inRun: Context;
  private readonly open = new Map<string, Span>();
  /** When this process last saw an event of the run (or started it): a lower bound for a step begun since. */
  private lastSeen = Date.now();
  /** Each tool step's call, from the response that asked for it (its id is the model's call id). */
  private readonly calls = new Map<string, ToolCall>();
  /** What the journal records of each step's input and output. */
  private readonly digests: StepDigests;
  /** Whether spans carry output digests (`OtelTelemetryOptions.logDigest`). */
  private readonly logDigest: boolean;
  /** The provider's name, as the conventions in use name it: `gen_ai.provider.name` or `gen_ai.system`. */
  private readonly provider: Attributes;
  /** When each model attempt this process started began (ms), for the duration metric. */
  private readonly modelStarts = new Map<string, number>();

  constructor(
    private readonly tracer: Tracer,
    private readonly run: TelemetryRunStart,
    private readonly settings: SpanSettings,
  ) {
    this.logDigest = settings.logDigest;
    this.digests = new StepDigests(settings.logDigest, settings.toolContent);
    this.provider =
      run.provider === undefined ? {} : { [settings.latest ? "gen_ai.provider.name" : "gen_ai.system"]: run.provider };
    this.root = tracer.startSpan(
      `invoke_agent ${run.loopId}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          "gen_ai.operation.name": "invoke_agent",
          // The latest conventions keep the agent's id for remote agents: a run is an internal span.
          ...(settings.latest ? {} : { "gen_ai.agent.id": run.loopId }),
          "gen_ai.agent.name": run.loopId,
          "gen_ai.conversation.id": run.runId,
          ...this.provider,
          "loom.resumed": run.recorded !== undefined,
        },
      },
      parentOf(run.recorded),
    );
    this.inRun = trace.setSpan(context.active(), this.root);
    // A span context that is not valid (a no-op tracer, no parent) names no trace: nothing to journal.
    this.carrier = isSpanContextValid(this.root.spanContext()) ? { traceparent: traceparent(this.root) } : undefined;
    if (this.root.isRecording()) {
      this.onEvent = (event) => this.told(event);
      this.onEntries = (entries) => this.digests.told(entries);
    }
  }

  private start(key: string, name: string, kind: SpanKind, attributes: Attributes, startTime?: number): void {
    this.open.get(key)?.end(); // a step started again before its end: the earlier attempt is over
    const base = { kind, attributes: { "gen_ai.conversation.id": this.run.runId, ...attributes } };
    this.open.set(
      key,
      this.tracer.startSpan(name, startTime === undefined ? base : { ...base, startTime }, this.inRun),
    );
  }

  private finish(key: string, error?: { name: string; message: string }): Span | undefined {
    const span = this.open.get(key);
    if (!span) return undefined;
    this.open.delete(key);
    if (error) {
      span.recordException({ name: error.name, message: error.message });
      span.setAttribute("error.type", error.name);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    }
    return span;
  }

  private told(event: RunEvent): void {
    const seen = this.lastSeen;
    this.lastSeen = Date.now();
    switch (event.type) {
      case "model-started":
        this.modelStarts.set(event.stepId, this.lastSeen);
        this.start(`model:${event.stepId}`, `chat${this.run.model ? ` ${this.run.model}` : ""}`, SpanKind.CLIENT, {
          "gen_ai.operation.name": "chat",
          ...this.provider,
          ...(this.run.model ? { "gen_ai.request.model": this.run.model } : {}),
          "loom.step.id": event.stepId,
          "loom.attempt": event.attempt,
          ...this.digests.input(event.stepId),
        });
        break;
      case "model-retrying": {
        this.measure(event.stepId, event.error.name);
        const span = this.finish(`model:${event.stepId}`, event.error);
        if (event.error.status !== undefined) span?.setAttribute("http.response.status_code", event.error.status);
        if (event.retryAt) span?.setAttribute("loom.retry_at", event.retryAt);
        span?.end();
        break;
      }
      case "model-finished": {
        event.toolCalls.forEach((call, index) => {
          this.calls.set(toolStepId(this.run.loopId, event.turn, index), call);
        });
        this.measure(event.stepId, undefined, event.usage);
        const span = this.finish(`model:${event.stepId}`);
        const output = this.digests.takeOutput(event.stepId);
        if (!span) break;
        if (output) span.setAttributes(output);
        if (event.usage?.inputTokens !== undefined)
          span.setAttribute("gen_ai.usage.input_tokens", event.usage.inputTokens);
        if (event.usage?.outputTokens !== undefined)
          span.setAttribute("gen_ai.usage.output_tokens", event.usage.outputTokens);
        if (event.finishReason) span.setAttribute("gen_ai.response.finish_reasons", [event.finishReason]);
        span.end();
        break;
      }
      case "tool-started":
        this.start(`tool:${event.stepId}`, `execute_tool ${event.toolName}`, SpanKind.INTERNAL, {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": event.toolName,
          ...this.callId(event.stepId),
          "loom.step.id": event.stepId,
          ...this.digests.input(event.stepId),
        });
        break;
      case "tool-finished": {
        // A tool whose earlier run's outcome was lost (a crash) and that ran again here: its events
        // say it started once, before the crash, so its span here starts at the last event before it.
        if (!this.open.has(`tool:${event.stepId}`)) {
          const attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.toolName,
            ...this.callId(event.stepId),
            "loom.step.id": event.stepId,
            "loom.rerun": true,
            ...this.digests.input(event.stepId),
          };
          this.start(`tool:${event.stepId}`, `execute_tool ${event.toolName}`, SpanKind.INTERNAL, attributes, seen);
        }
        const failed =
          event.status === "error" ? { name: "ToolError", message: `${event.toolName} failed` } : undefined;
        const span = this.finish(`tool:${event.stepId}`, failed);
        // As the journal records it; a failure's (its outcome decision) is the event's, unless keyed.
        const output = this.digests.takeOutput(event.stepId) ?? {
          ...(event.digest !== null && this.logDigest ? { "loom.output.digest": event.digest } : {}),
          "loom.output.bytes": event.bytes,
        };
        if (!span) break;
        const digest = output["loom.output.digest"];
        if (digest !== undefined) span.setAttribute("loom.log.digest", digest);
        span.setAttributes(output);
        span.end();
        break;
      }
      case "call-settled": {
        // Settled without running (a refusal, search_tools, a declined approval): a span of no length.
        this.digests.forget(event.stepId);
        if (this.open.has(`tool:${event.stepId}`)) {
          this.finish(`tool:${event.stepId}`)?.end();
          break;
        }
        const span = this.tracer.startSpan(
          `execute_tool ${event.toolName}`,
          {
            kind: SpanKind.INTERNAL,
            attributes: {
              "gen_ai.conversation.id": this.run.runId,
              "gen_ai.operation.name": "execute_tool",
              "gen_ai.tool.name": event.toolName,
              ...this.callId(event.stepId),
              "loom.step.id": event.stepId,
              "loom.settled.reason": event.reason,
            },
          },
          this.inRun,
        );
        if (event.status === "error") span.setStatus({ code: SpanStatusCode.ERROR, message: event.reason });
        span.end();
        break;
      }
      case "run-interrupted":
        this.root.addEvent("loom.run.interrupted", { "loom.reason": event.reason });
        this.root.setAttribute("loom.outcome", `interrupted (${event.reason})`);
        if (event.cause) {
          this.root.recordException({ name: event.cause.name, message: event.cause.message });
          this.root.setStatus({ code: SpanStatusCode.ERROR, message: event.cause.message });
        }
        break;
      case "run-cancelled":
        this.root.setAttribute("loom.outcome", "cancelled");
        break;
      case "run-completed":
        this.root.setAttribute("loom.outcome", "completed");
        this.root.setAttribute("loom.iterations", event.iterations);
        break;
      default:
        break;
    }
  }

  /** Records a model attempt this process made in the GenAI client metrics: its duration, and its tokens. */
  private measure(
    stepId: string,
    errorType: string | undefined,
    usage?: { readonly inputTokens?: number; readonly outputTokens?: number },
  ): void {
    const started = this.modelStarts.get(stepId);
    this.modelStarts.delete(stepId);
    if (started === undefined) return; // not started here: nothing of it was measured
    const attributes: Attributes = {
      "gen_ai.operation.name": "chat",
      ...this.provider,
      ...(this.run.model ? { "gen_ai.request.model": this.run.model } : {}),
    };
    this.settings.metrics.duration.record(
      (Date.now() - started) / 1000,
      errorType === undefined ? attributes : { ...attributes, "error.type": errorType },
    );
    if (usage?.inputTokens !== undefined)
      this.settings.metrics.tokens.record(usage.inputTokens, { ...attributes, "gen_ai.token.type": "input" });
    if (usage?.outputTokens !== undefined)
      this.settings.metrics.tokens.record(usage.outputTokens, { ...attributes, "gen_ai.token.type": "output" });
  }

  private callId(stepId: string): Attributes {
    // A step asked for by a response this process saw, else by one the journal held at the start.
    const id = this.calls.get(stepId)?.id ?? this.run.toolCallIds?.[stepId];
    return id === undefined ? {} : { "gen_ai.tool.call.id": id };
  }

  end(outcome: { readonly status: "completed" | "interrupted" | "failed"; readonly error?: unknown }): void {
    // Steps still open stop with the run (an abort, a crash of the loop): their outcome is unknown.
    for (const span of this.open.values()) {
      span.setAttribute("loom.outcome", "unknown");
      span.end();
    }
    this.open.clear();
    if (outcome.status === "failed") {
      const e = outcome.error;
      const error = e instanceof Error ? e : new Error(String(e));
      this.root.recordException(error);
      this.root.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    }
    this.root.end();
  }
}

/**
 * The runtime's telemetry hook: what a tracer needs from a run, as the run's own events (its
 * `RunEvent`s), plus the trace context it journals once so a resumed run, in any process, lands
 * in the same trace. `loom-agent/otel` implements it with OpenTelemetry; nothing here loads it.
 */

import { DECISION_SOURCES, parseFrameId, toolStepId, traceContextId } from "../../events/ids.ts";
import type { JournalEntry, NewEntry } from "../../events/types.ts";
import type { RunEvent } from "../../projections/events.ts";
import type { RunState } from "../../projections/runState.ts";

/** A trace context as text fields (W3C `traceparent`, `tracestate`), the form a carrier journals. */
export type TraceCarrier = Readonly<Record<string, string>>;

/** What a telemetry backend is told when a run starts or resumes in this process. */
export interface TelemetryRunStart {
  readonly runId: string;
  readonly loopId: string;
  /** The model's id, when its adapter tells it (`modelId`). */
  readonly model: string | undefined;
  /** The model's provider (`openai`, `anthropic`…), when its adapter tells it (`Model.provider`). */
  readonly provider?: string;
  /** The trace context journaled by the run's first attempt; undefined for a run that has none yet. */
  readonly recorded: TraceCarrier | undefined;
  /**
   * The model's call id of each tool step the journaled model responses asked for, by step id
   * (`<loop>#turn:<i>:tool:<j>`): a tool this process runs again (its earlier outcome unknown)
   * was asked for by a response this process never saw.
   */
  readonly toolCallIds?: Readonly<Record<string, string>>;
}

/** One run's telemetry in this process: it sees the run's events and its end. */
export interface RunTelemetryScope {
  /** The context to journal when the run has none yet (its first attempt); none when nothing is traced. */
  readonly carrier: TraceCarrier | undefined;
  /**
   * Each event of the run this process makes (served steps make none). Absent when nothing is
   * recorded (a no-op tracer): the run then folds no events for telemetry at all.
   */
  readonly onEvent?: (event: RunEvent) => void;
  /**
   * The entries of each append this process makes, as the journal keeps them (redacted where a
   * redaction changed them: records of what it redacted, keyed digests), told before the events
   * of that append. Optional: what a span says of a step's input and output comes from here.
   */
  readonly onEntries?: (entries: readonly JournalEntry[]) => void;
  /** The run stopped in this process: completed, interrupted, or failed with `error`. */
  end(outcome: { readonly status: "completed" | "interrupted" | "failed"; readonly error?: unknown }): void;
}

/**
 * A telemetry backend for runs (`agentLoop$({ telemetry })`): `loom-agent/otel`'s `otelTelemetry`.
 *
 * @example
 * ```ts
 * import { otelTelemetry } from "loom-agent/otel";
 * const loop = agentLoop$({ id: "support", model, tools, telemetry: otelTelemetry() });
 * ```
 */
export interface RunTelemetry {
  /** A run starts or resumes in this process: the scope that sees its events until it stops. */
  startRun(run: TelemetryRunStart): RunTelemetryScope;
}

/** The trace context a run journaled, if any. */
export function recordedTraceContext(state: RunState, loopId: string): TraceCarrier | undefined {
  const choice = state.decisions[traceContextId(loopId)]?.choice as { carrier?: unknown } | undefined;
  const carrier = choice?.carrier;
  if (typeof carrier !== "object" || carrier === null) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(carrier)) if (typeof v === "string") out[k] = v;
  return out;
}

/** The model's call id of each tool step a journaled (hot) model response asked for, by step id. */
export function recordedToolCallIds(state: RunState, loopId: string): Record<string, string> {
  const ids: Record<string, string> = {};
  for (const frame of Object.values(state.frames)) {
    const parsed = parseFrameId(frame.frameId);
    if (parsed?.kind !== "model" || parsed.loopId !== loopId || frame.status !== "completed") continue;
    const calls = (frame.output as { toolCalls?: unknown } | undefined)?.toolCalls;
    if (!Array.isArray(calls)) continue;
    calls.forEach((call: { id?: unknown } | null, index) => {
      if (typeof call?.id === "string") ids[toolStepId(loopId, parsed.turn, index)] = call.id;
    });
  }
  return ids;
}

/** The decision that journals the run's trace context (once, with its first attempt). */
export function traceContextDecision(loopId: string, carrier: TraceCarrier): NewEntry {
  return {
    type: "decision.recorded",
    data: {
      decisionId: traceContextId(loopId),
      source: DECISION_SOURCES.traceContext,
      choice: { carrier: { ...carrier } },
    },
  };
}

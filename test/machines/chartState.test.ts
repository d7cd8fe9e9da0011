import { describe, expect, it } from "vitest";
import type { NewEntry } from "../../src/events/types.ts";
import { chartStateOf, JOURNAL_CHART_STATES } from "../../src/machines/chartState.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { buildRun, withSeqs } from "../projections/runBuilder.ts";

/** The chart state read from a journal: each prefix of a hand-built run, and where it rests. */
const chartAfter = (entries: readonly NewEntry[]) => chartStateOf(foldEntries(withSeqs("r", entries)));

const ask = (name: string) => ({ kind: "ok", name, input: {}, output: { ok: name } }) as const;

describe("chartStateOf: the agentLoop state a journal shows a run in", () => {
  const { entries } = buildRun({
    loopId: "demo",
    runId: "r",
    turns: [{ calls: [ask("search"), ask("fetch")] }],
    complete: true,
  });
  const types = entries.map((e) => e.type);

  it("walks starting, callingModel, dispatching, deciding, callingModel, finishing, completed along a run", () => {
    const charts = entries.map((_, i) => chartAfter(entries.slice(0, i + 1)));
    expect(chartAfter([])).toBe("starting");
    expect(types).toEqual([
      "run.started",
      "frame.started",
      "frame.completed",
      "frame.started",
      "frame.started",
      "frame.completed",
      "frame.completed",
      "frame.started",
      "frame.completed",
      "run.completed",
    ]);
    expect(charts).toEqual([
      "running.deciding", // started: the first model call is next
      "running.callingModel",
      "running.dispatching", // the response asks for two calls
      "running.dispatching",
      "running.dispatching",
      "running.dispatching", // one call of two ended
      "running.deciding", // both ended: the next turn is decided
      "running.callingModel",
      "finishing", // an answer with no calls
      "completed",
    ]);
  });

  it("backs off after a failed attempt with a next one due, and calls the model again once it starts", () => {
    const failed = (retryAt: number | null): NewEntry => ({
      type: "attempt.failed",
      data: {
        frameId: "demo#turn:0:model",
        attempt: 1,
        error: { name: "E", message: "429", retryable: true },
        retryAt,
      },
    });
    const started = entries.slice(0, 2);
    expect(chartAfter([...started, failed(5_000)])).toBe("running.backingOff");
    expect(chartAfter([...started, failed(5_000), entries[1] as NewEntry])).toBe("running.callingModel");
    expect(chartAfter([...started, failed(null)])).toBe("running.callingModel"); // no next attempt: the run ends next
  });

  it("is the run's status once it ended, whatever its last turn was at", () => {
    const upTo = entries.slice(0, 4); // a call in flight
    const ends: [NewEntry, string][] = [
      [{ type: "run.cancelled", data: { reason: "operator stop" } }, "cancelled"],
      [{ type: "run.failed", data: { error: { name: "Error", message: "boom" } } }, "failed"],
      [{ type: "run.interrupted", data: { reason: "aborted", detail: null } }, "interrupted"],
    ];
    for (const [end, chart] of ends) expect(chartAfter([...upTo, end])).toBe(chart);
    // Resumed: the interrupted run runs again from its next frame.
    const resumed = [...upTo, (ends[2] as [NewEntry, string])[0], entries[4] as NewEntry];
    expect(chartAfter(resumed)).toBe("running.dispatching");
  });

  it("names only the states listed as a journal's", () => {
    const seen = new Set(entries.map((_, i) => chartAfter(entries.slice(0, i))));
    for (const chart of seen) expect(JOURNAL_CHART_STATES).toContain(chart);
  });
});

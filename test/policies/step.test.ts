import { describe, expect, it } from "vitest";
import type { JournalEntry, NewEntry } from "../../src/events/types.ts";
import { planStep, type StepSpec } from "../../src/policies/step.ts";
import { foldEntries } from "../../src/projections/runState.ts";

/**
 * The durable step's decision, Given the journal (entries), When a step is taken (the spec and the
 * clock), Then what it does. Every branch of planStep, with the entries that lead to it.
 */
const NOW = Date.UTC(2026, 11, 3, 12, 0, 0);
const frameId = "support#turn:1:tool:0";
const step: StepSpec = { frameId, effect: "tool:refund", inputDigest: "d-in", onUnknownOutcome: "rerun" };

function given(...entries: NewEntry[]) {
  const all: NewEntry[] = [
    { type: "run.started", data: { loopId: "support", input: "hi", tools: ["refund"] } },
    ...entries,
  ];
  return foldEntries(
    all.map(
      (e, i) => ({ ...e, runId: "r-1", seq: i + 1, meta: { v: 2, at: new Date(NOW).toISOString() } }) as JournalEntry,
    ),
  );
}

const started = (inputDigest = "d-in", effect = "tool:refund"): NewEntry => ({
  type: "frame.started",
  data: { frameId, effect, inputDigest },
});
const completed: NewEntry = { type: "frame.completed", data: { frameId, digest: "d-out", bytes: 2, output: {} } };
const failedAttempt = (attempt: number, retryAt: number | null): NewEntry => ({
  type: "attempt.failed",
  data: { frameId, attempt, error: { name: "Error", message: "503", status: 503, retryable: true }, retryAt },
});

describe("planStep: Given entries, When a step is taken, Then…", () => {
  it("runs attempt 1 when the journal has nothing for the step", () => {
    expect(planStep(given(), step, NOW, undefined)).toEqual({ kind: "run", attempt: 1, spent: 0 });
  });

  it("serves a completed frame, and a failed one, without running anything", () => {
    const plan = planStep(given(started(), completed), step, NOW, undefined);
    expect(plan.kind).toBe("recorded");
    expect(plan.kind === "recorded" && plan.frame.status).toBe("completed");
    const failed: NewEntry = { type: "frame.completed", data: { frameId, failed: true } };
    const served = planStep(given(started(), failed), step, NOW, undefined);
    expect(served.kind === "recorded" && served.frame.status).toBe("failed");
  });

  it("serves a recorded frame even past the deadline (only new work is stopped by it)", () => {
    expect(planStep(given(started(), completed), step, NOW, NOW - 1).kind).toBe("recorded");
  });

  it("refuses a journal whose frame has another effect or another input digest", () => {
    expect(planStep(given(started("d-in", "tool:lookup")), step, NOW, undefined)).toEqual({
      kind: "diverged",
      what: "a frame of effect tool:lookup where this code takes tool:refund",
    });
    expect(planStep(given(started("d-other"), completed), step, NOW, undefined)).toEqual({
      kind: "diverged",
      what: "a tool:refund frame with another input digest",
    });
  });

  it("serves a replay without comparing input digests when told not to check them", () => {
    const plan = planStep(given(started("d-other"), completed), { ...step, checkInput: false }, NOW, undefined);
    expect(plan.kind).toBe("recorded");
  });

  it("runs again a start with no outcome (attempt 2), unless the step must not run twice", () => {
    expect(planStep(given(started()), step, NOW, undefined)).toEqual({ kind: "run", attempt: 1, spent: 0 });
    expect(planStep(given(started()), { ...step, onUnknownOutcome: "fail" }, NOW, undefined)).toEqual({
      kind: "outcome-unknown",
    });
  });

  it("does not call a journaled failure an unknown outcome: the next attempt is due, not in doubt", () => {
    const state = given(started(), failedAttempt(1, NOW - 5));
    expect(planStep(state, { ...step, onUnknownOutcome: "fail" }, NOW, undefined)).toEqual({
      kind: "run",
      attempt: 2,
      spent: 0,
    });
  });

  it("an attempt started after a failed one and never ended is in doubt again", () => {
    const state = given(started(), failedAttempt(1, NOW - 5), started());
    expect(planStep(state, { ...step, onUnknownOutcome: "fail" }, NOW, undefined).kind).toBe("outcome-unknown");
    expect(planStep(state, step, NOW, undefined)).toEqual({ kind: "run", attempt: 2, spent: 0 });
  });

  it("waits out a journaled back-off that has not ended (a resume waits only what remains)", () => {
    const state = given(started(), failedAttempt(1, NOW + 700));
    expect(planStep(state, step, NOW, undefined)).toEqual({ kind: "waiting", attempt: 1, retryAt: NOW + 700 });
    expect(planStep(state, step, NOW + 700, undefined)).toEqual({ kind: "run", attempt: 2, spent: 0 });
  });

  it("stops new work past the run's deadline, a back-off included", () => {
    expect(planStep(given(), step, NOW, NOW)).toEqual({ kind: "past-deadline" });
    expect(planStep(given(started(), failedAttempt(1, NOW + 700)), step, NOW, NOW - 1)).toEqual({
      kind: "past-deadline",
    });
  });

  it("counts attempts over the whole journal and hands the spent ones to the policy", () => {
    const model: StepSpec = {
      frameId: "support#model:0",
      effect: "model",
      inputDigest: "p",
      onUnknownOutcome: "rerun",
    };
    const mf = "support#model:0";
    const state = given(
      { type: "frame.started", data: { frameId: mf, effect: "model", inputDigest: "p" } },
      {
        type: "attempt.failed",
        data: { frameId: mf, attempt: 1, error: { name: "E", message: "m", retryable: true }, retryAt: null },
      },
      { type: "run.interrupted", data: { reason: "model-error", detail: null } },
    );
    expect(planStep(state, model, NOW, undefined)).toEqual({ kind: "run", attempt: 2, spent: 1 });
  });
});

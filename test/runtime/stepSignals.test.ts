import { describe, expect, it } from "vitest";
import { StepSignals } from "../../src/runtime/stepSignals.ts";

describe("StepSignals: a step's signal aborts as AbortSignal.any([run, actor]) would", () => {
  it("the run's abort reaches every live step with the run's reason, not a released one", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const a = steps.link(new AbortController().signal);
    const b = steps.link(new AbortController().signal);
    steps.release(b);
    run.abort(new Error("stop"));
    expect(a.aborted).toBe(true);
    expect((a.reason as Error).message).toBe("stop");
    expect(b.aborted).toBe(false);
  });

  it("the actor's abort reaches its step alone, with the actor's reason", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const actor = new AbortController();
    const a = steps.link(actor.signal);
    const b = steps.link(new AbortController().signal);
    actor.abort("actor stopped");
    expect(a.reason).toBe("actor stopped");
    expect(b.aborted).toBe(false);
  });

  it("a signal already aborted gives its reason at once, the run's first", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const actor = new AbortController();
    actor.abort("actor");
    expect(steps.link(actor.signal).reason).toBe("actor");
    run.abort("run");
    expect(steps.link(actor.signal).reason).toBe("run");
    expect(new StepSignals(run.signal).link(new AbortController().signal).reason).toBe("run");
  });

  it("without a run signal the actor's is the step's; disposed, the run's abort reaches no step", () => {
    const actor = new AbortController().signal;
    expect(new StepSignals(undefined).link(actor)).toBe(actor);
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const a = steps.link(new AbortController().signal);
    steps.dispose();
    run.abort("late");
    expect(a.aborted).toBe(false);
  });
});

import { describe, expect, it } from "vitest";
import { CallStop, ownedController, StepSignals } from "../../src/runtime/stepSignals.ts";

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

  it("an owned actor signal is the step's own: no second signal, aborted by the run with its reason unless released", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const actor = ownedController();
    const released = ownedController();
    expect(steps.link(actor.signal)).toBe(actor.signal);
    steps.release(steps.link(released.signal));
    run.abort(new Error("cancelled"));
    expect((actor.signal.reason as Error).message).toBe("cancelled");
    expect(released.signal.aborted).toBe(false);
    const late = ownedController();
    expect(steps.link(late.signal).reason).toBe(run.signal.reason); // the run already stopped: at once
  });

  it("an owned actor signal aborted by its actor stays the step's, with the actor's reason", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const actor = ownedController();
    const step = steps.link(actor.signal);
    actor.abort("actor stopped");
    run.abort("run");
    expect(step.reason).toBe("actor stopped");
  });

  it("a plain call's stop: its signal is made when read, aborts when stopped (before or after), and is the step's own", () => {
    const early = new CallStop();
    early.stop();
    expect(early.signal.aborted).toBe(true); // stopped before its step read it
    const call = new CallStop();
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    expect(steps.link(call.signal)).toBe(call.signal); // owned: no second signal for the step
    expect(call.signal.aborted).toBe(false);
    call.stop();
    expect((call.signal.reason as DOMException).name).toBe("AbortError"); // as xstate stops an actor
  });
});

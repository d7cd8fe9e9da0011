import { describe, expect, it } from "vitest";
import { withLimits } from "../../src/runtime/steps/failurePolicy.ts";
import { CallStop, StepSignals, StepStop } from "../../src/runtime/steps/stepSignals.ts";

/** What xstate gives an actor's creator: an object with the actor's signal. */
const actorArgs = (signal = new AbortController().signal) => ({ signal });

describe("StepSignals: a step's stop aborts as AbortSignal.any([run, actor]) would", () => {
  it("the run's abort reaches every live step with the run's reason, not a released one", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const a = steps.link(actorArgs());
    const b = steps.link(actorArgs());
    steps.release(b);
    run.abort(new Error("stop"));
    expect(a.aborted).toBe(true);
    expect((a.reason as Error).message).toBe("stop");
    expect((a.signal.reason as Error).message).toBe("stop");
    expect(b.aborted).toBe(false);
  });

  it("the actor's abort reaches its step alone, with the actor's reason", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const actor = new AbortController();
    const a = steps.link(actorArgs(actor.signal));
    const b = steps.link(actorArgs());
    actor.abort("actor stopped");
    expect(a.reason).toBe("actor stopped");
    expect(b.aborted).toBe(false);
  });

  it("a signal already aborted gives its reason at once, the run's first", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const actor = new AbortController();
    actor.abort("actor");
    expect(steps.link(actorArgs(actor.signal)).reason).toBe("actor");
    run.abort("run");
    expect(steps.link(actorArgs(actor.signal)).reason).toBe("run");
    expect(new StepSignals(run.signal).link(actorArgs()).signal.reason).toBe("run");
  });

  it("without a run signal the actor's own stop is the step's; disposed, the run's abort reaches no step", () => {
    const own = new StepStop();
    expect(new StepSignals(undefined).link(own)).toBe(own);
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const a = steps.link(actorArgs());
    steps.dispose();
    run.abort("late");
    expect(a.aborted).toBe(false);
  });

  it("an actor's own stop is the step's: no second one, aborted by the run with its reason unless released", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const actor = new StepStop();
    const released = new StepStop();
    expect(steps.link(actor)).toBe(actor);
    steps.release(steps.link(released));
    run.abort(new Error("cancelled"));
    expect((actor.signal.reason as Error).message).toBe("cancelled");
    expect(released.signal.aborted).toBe(false);
    const late = new StepStop();
    expect(steps.link(late).reason).toBe(run.signal.reason); // the run already stopped: at once
  });

  it("an actor's own stop aborted by its actor stays the step's, with the actor's reason", () => {
    const run = new AbortController();
    const steps = new StepSignals(run.signal);
    const actor = new StepStop();
    const step = steps.link(actor);
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
    expect(steps.link(call)).toBe(call); // owned: no second stop for the step
    expect(call.signal.aborted).toBe(false);
    call.stop();
    expect((call.signal.reason as DOMException).name).toBe("AbortError"); // as xstate stops an actor
  });
});

describe("StepStop: an abort whose AbortSignal is made when read", () => {
  it("makes no signal until read, and the one it makes carries the reason it aborted with", () => {
    const stop = new StepStop();
    const seen: unknown[] = [];
    stop.onAbort(() => seen.push(stop.reason));
    const off = stop.onAbort(() => seen.push("removed"));
    off();
    stop.abort("why");
    stop.abort("again"); // once
    expect(seen).toEqual(["why"]);
    expect(stop.signal.aborted).toBe(true);
    expect(stop.signal.reason).toBe("why");
  });

  it("a signal read before the abort aborts with it, its listeners before the stop's own", () => {
    const stop = new StepStop();
    const order: string[] = [];
    stop.signal.addEventListener("abort", () => order.push("signal"));
    stop.onAbort(() => order.push("stop"));
    stop.abort();
    expect(order).toEqual(["signal", "stop"]);
    expect((stop.reason as DOMException).name).toBe("AbortError");
    expect(stop.signal.reason).toBe(stop.reason);
  });

  it("withLimits: the effect is stopped by the step's abort or by its time limit, whichever comes first", async () => {
    const stop = new StepStop();
    const read: AbortSignal[] = [];
    const pending = withLimits(stop, 10_000, undefined, (s) => {
      read.push(s.signal);
      return new Promise(() => {});
    });
    await Promise.resolve();
    stop.abort("run stopped");
    const result = await pending;
    expect("error" in result && result.error).toBe("run stopped");
    expect("error" in result && result.stopped).toBeUndefined();
    expect(read[0]?.reason).toBe("run stopped");
    const timed = await withLimits(new StepStop(), 5, undefined, () => new Promise(() => {}));
    expect("error" in timed && timed.stopped).toBe("timeout");
    expect("error" in timed && (timed.error as DOMException).name).toBe("TimeoutError");
  });
});

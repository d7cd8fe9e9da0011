import { describe, expect, it } from "vitest";
import { isRunCancelledError, OwnershipLostError, RunCancelledError } from "../../src/core/errors.ts";
import { CallStop, RunStop, StepStop } from "../../src/runtime/base/runStop.ts";
import { withLimits } from "../../src/runtime/steps/failurePolicy.ts";

/** What xstate gives an actor's creator: an object with the actor's signal. */
const actorArgs = (signal = new AbortController().signal) => ({ signal });

describe("RunStop: a step's stop aborts as AbortSignal.any([run, actor]) would", () => {
  it("the run's abort reaches every live step with the run's reason, not a released one", () => {
    const run = new AbortController();
    const steps = new RunStop("r", run.signal);
    const a = steps.step(actorArgs());
    const b = steps.step(actorArgs());
    steps.release(b);
    run.abort(new Error("stop"));
    expect(a.aborted).toBe(true);
    expect((a.reason as Error).message).toBe("stop");
    expect((a.signal.reason as Error).message).toBe("stop");
    expect(b.aborted).toBe(false);
  });

  it("the actor's abort reaches its step alone, with the actor's reason", () => {
    const run = new AbortController();
    const steps = new RunStop("r", run.signal);
    const actor = new AbortController();
    const a = steps.step(actorArgs(actor.signal));
    const b = steps.step(actorArgs());
    actor.abort("actor stopped");
    expect(a.reason).toBe("actor stopped");
    expect(b.aborted).toBe(false);
  });

  it("a signal already aborted gives its reason at once, the run's first", () => {
    const run = new AbortController();
    const steps = new RunStop("r", run.signal);
    const actor = new AbortController();
    actor.abort("actor");
    expect(steps.step(actorArgs(actor.signal)).reason).toBe("actor");
    run.abort("run");
    expect(steps.step(actorArgs(actor.signal)).reason).toBe("run");
    expect(new RunStop("r", run.signal).step(actorArgs()).signal.reason).toBe("run");
  });

  it("without a caller's signal the actor's own stop is the step's; released, the run's abort reaches no step", () => {
    const own = new StepStop();
    const alone = new RunStop("r", undefined);
    expect(alone.step(own)).toBe(own);
    alone.lose(new Error("taken over")); // the run's own stop reaches its steps too
    expect((own.reason as Error).message).toBe("taken over");
    const run = new AbortController();
    const steps = new RunStop("r", run.signal);
    const a = steps.step(actorArgs());
    steps.releaseSteps();
    run.abort("late");
    expect(a.aborted).toBe(false);
  });

  it("an actor's own stop is the step's: no second one, aborted by the run with its reason unless released", () => {
    const run = new AbortController();
    const steps = new RunStop("r", run.signal);
    const actor = new StepStop();
    const released = new StepStop();
    expect(steps.step(actor)).toBe(actor);
    steps.release(steps.step(released));
    run.abort(new Error("cancelled"));
    expect((actor.signal.reason as Error).message).toBe("cancelled");
    expect(released.signal.aborted).toBe(false);
    const late = new StepStop();
    expect(steps.step(late).reason).toBe(run.signal.reason); // the run already stopped: at once
  });

  it("an actor's own stop aborted by its actor stays the step's, with the actor's reason", () => {
    const run = new AbortController();
    const steps = new RunStop("r", run.signal);
    const actor = new StepStop();
    const step = steps.step(actor);
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
    const steps = new RunStop("r", run.signal);
    expect(steps.step(call)).toBe(call); // owned: no second stop for the step
    expect(call.signal.aborted).toBe(false);
    call.stop();
    expect((call.signal.reason as DOMException).name).toBe("AbortError"); // as xstate stops an actor
  });
});

describe("RunStop's fence: a refused append stops the run and its steps", () => {
  it("carries the lease's token; a lost run's steps abort with the ownership error", () => {
    const stop = new RunStop("r-1", undefined);
    const fence = stop.fence(7);
    expect(fence.token).toBe(7);
    const step = stop.step(new StepStop());
    const lost = new OwnershipLostError("r-1", 7, undefined);
    fence.onLost(lost);
    expect(stop.signal.reason).toBe(lost);
    expect(step.reason).toBe(lost);
  });

  it("a refusal for a cancel request aborts the run with a RunCancelledError naming it", () => {
    const stop = new RunStop("r-2", undefined);
    stop.fence(1).onCancelled?.(new RunCancelledError("r-2", "operator stop"));
    expect(isRunCancelledError(stop.signal.reason)).toBe(true);
    expect((stop.signal.reason as RunCancelledError).reason).toBe("operator stop");
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

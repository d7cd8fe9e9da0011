/** The abort signals of a run's durable steps: `StepSignals`, and the controllers a step may take as its own. */

/** One options object for every step's listener (not one allocated per step). */
const ONCE = Object.freeze({ once: true });

/** Controllers whose signal a step may take as its own, by signal (see {@link ownedController}). */
const owned = new WeakMap<AbortSignal, AbortController>();

/**
 * An actor's abort controller that its step may abort itself: `link` then hands the actor's own
 * signal to the step and aborts it when the run's does, instead of a second controller chained
 * to it (the runtime's stand-in actors make theirs so: sharedMachine.ts).
 */
export function ownedController(): AbortController {
  const controller = new AbortController();
  owned.set(controller.signal, controller);
  return controller;
}

/**
 * What stops one call of the `plainCalls` actor (it is no actor of its own): the signal its step
 * reads, made only then (a call served from the journal makes none), aborted by `stop`.
 */
export class CallStop {
  private controller: AbortController | undefined;
  private stopped = false;

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = ownedController();
      if (this.stopped) this.controller.abort();
    }
    return this.controller.signal;
  }

  /** As xstate stops an actor: its signal aborts (with an AbortError). */
  stop(): void {
    this.stopped = true;
    this.controller?.abort();
  }
}

/**
 * The signal each durable step's effect runs under: aborted when the run's signal aborts or the
 * step's actor is stopped, with the reason of whichever came first (the run's when both already
 * have), as `AbortSignal.any([runSignal, actorSignal])` would.
 *
 * `AbortSignal.any` per step cost the loop more than any other piece of its signal handling (each
 * call registers a weakly held dependant on the run's signal, swept only by the collector). Here
 * the run's signal gets one listener for the whole run, which aborts the steps live at that moment;
 * a step is released once its effect is done with its signal (`release`), and `dispose` removes
 * the run's listener when the run ends.
 */
export class StepSignals {
  /** The steps not released yet, by the signal their effect was given. */
  private readonly live = new Map<AbortSignal, AbortController>();
  private readonly onRunAbort: (() => void) | undefined;

  constructor(private readonly run: AbortSignal | undefined) {
    if (run === undefined || run.aborted) return;
    // Registered after the run's own listeners (the chart's ABORT): a step then aborts after them,
    // as a dependant of AbortSignal.any does.
    this.onRunAbort = () => {
      const steps = [...this.live.values()];
      this.live.clear();
      for (const c of steps) c.abort(run.reason);
    };
    run.addEventListener("abort", this.onRunAbort, { once: true });
  }

  /** The signal for one step whose actor has `actorSignal`. */
  link(actorSignal: AbortSignal): AbortSignal {
    const run = this.run;
    if (run === undefined) return actorSignal;
    const own = owned.get(actorSignal);
    if (own !== undefined) {
      // The actor's signal is the step's: stopping the actor aborts it, and so does the run, from here.
      if (run.aborted) own.abort(run.reason);
      else if (!actorSignal.aborted) this.live.set(actorSignal, own);
      return actorSignal;
    }
    const step = new AbortController();
    const signal = step.signal;
    if (run.aborted) step.abort(run.reason);
    else if (actorSignal.aborted) step.abort(actorSignal.reason);
    else {
      this.live.set(signal, step);
      actorSignal.addEventListener(
        "abort",
        () => {
          this.live.delete(signal);
          step.abort(actorSignal.reason);
        },
        ONCE,
      );
    }
    return signal;
  }

  /**
   * The step's effect is done with `signal` (it returned, or it was stopped and its signal already
   * aborted): a later abort of the run no longer reaches it.
   */
  release(signal: AbortSignal): void {
    this.live.delete(signal);
  }

  /** The run ended: its signal's listener goes. */
  dispose(): void {
    if (this.onRunAbort) this.run?.removeEventListener("abort", this.onRunAbort);
    this.live.clear();
  }
}

/**
 * What stops a run's durable steps: `StepStop` (an abort whose AbortSignal is made only when
 * read), `CallStop`, and `StepSignals`, which links each step to the run's signal.
 */

/** One options object for every step's listener (not one allocated per step). */
const ONCE = Object.freeze({ once: true });

/**
 * An abort that a step (and its effect's time limits) can watch without an AbortSignal: the
 * signal is made when something reads `signal` (a tool or a model that looks at it), already
 * aborted when the stop came first. An AbortSignal with a listener cost a step about as much as
 * the rest of its own bookkeeping; most effects (a served step, a tool that never looks) need none.
 *
 * @example
 * const stop = new StepStop();
 * const off = stop.onAbort(() => console.log("stopped", stop.reason));
 * stop.abort(); // the listener runs; stop.signal is an aborted AbortSignal with an AbortError
 */
export class StepStop {
  private controller: AbortController | undefined;
  /** The first listener (most stops have one at most: no array for it). */
  private listener: (() => void) | undefined;
  /** The listeners after the first. */
  private listeners: (() => void)[] | undefined;
  private done = false;
  private why: unknown;

  /** Aborted, as `AbortSignal.aborted`. */
  get aborted(): boolean {
    return this.done;
  }

  /** Why, as `AbortSignal.reason` (undefined until aborted). */
  get reason(): unknown {
    return this.why;
  }

  /** The AbortSignal of this stop, made at the first read. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.done) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  /**
   * Aborts (once): `reason` undefined gives an AbortError, as `AbortController.abort()` does. Its
   * signal's listeners run first (if it was made), then those of {@link onAbort}.
   */
  abort(reason?: unknown): void {
    if (this.done) return;
    this.done = true;
    this.why = reason === undefined ? new DOMException("This operation was aborted", "AbortError") : reason;
    this.controller?.abort(this.why);
    const first = this.listener;
    const listeners = this.listeners;
    this.listener = undefined;
    this.listeners = undefined;
    first?.();
    if (listeners !== undefined) for (const listener of listeners) listener();
  }

  /** Calls `listener` once when this aborts (not if it already has); returns its removal. */
  onAbort(listener: () => void): () => void {
    if (this.done) return noop;
    this.watch(listener);
    return () => this.unwatch(listener);
  }

  /**
   * {@link onAbort} without a removal made for it: remove it with {@link unwatch} (a step's race
   * against its abort, made twice a turn). Nothing is called if this has aborted already.
   */
  watch(listener: () => void): void {
    if (this.done) return;
    if (this.listener === undefined && this.listeners === undefined) this.listener = listener;
    else (this.listeners ??= []).push(listener);
  }

  /** Removes a listener {@link watch} added (once; nothing if it is not there). */
  unwatch(listener: () => void): void {
    if (this.listener === listener) {
      this.listener = undefined;
      return;
    }
    const listeners = this.listeners;
    const at = listeners === undefined ? -1 : listeners.indexOf(listener);
    if (at >= 0) listeners?.splice(at, 1);
  }

  /** A stop that aborts when `signal` does, with its reason. */
  static following(signal: AbortSignal): StepStop {
    const stop = new StepStop();
    if (signal.aborted) stop.abort(signal.reason);
    else signal.addEventListener("abort", () => stop.abort(signal.reason), ONCE);
    return stop;
  }
}

const noop = () => {};

/**
 * What stops one call of the `plainCalls` actor (it is no actor of its own): aborted by `stop`,
 * as xstate stops an actor (with an AbortError); its signal is made only if its step reads it.
 */
export class CallStop extends StepStop {
  /** As xstate stops an actor: it aborts with an AbortError. */
  stop(): void {
    this.abort();
  }
}

/**
 * Links each durable step's stop to the run's signal: the step aborts when the run's signal
 * aborts or its actor is stopped, with the reason of whichever came first (the run's when both
 * already have), as `AbortSignal.any([runSignal, actorSignal])` would.
 *
 * `AbortSignal.any` per step cost the loop more than any other piece of its signal handling (each
 * call registers a weakly held dependant on the run's signal, swept only by the collector). Here
 * the run's signal gets one listener for the whole run, which aborts the steps live at that moment;
 * a step is released once its effect is done with its stop (`release`), and `dispose` removes
 * the run's listener when the run ends.
 */
export class StepSignals {
  /** The steps not released yet. */
  private readonly live = new Set<StepStop>();
  private readonly onRunAbort: (() => void) | undefined;

  constructor(private readonly run: AbortSignal | undefined) {
    if (run === undefined || run.aborted) return;
    // Registered after the run's own listeners (the chart's ABORT): a step then aborts after them,
    // as a dependant of AbortSignal.any does.
    this.onRunAbort = () => {
      const steps = [...this.live];
      this.live.clear();
      for (const step of steps) step.abort(run.reason);
    };
    run.addEventListener("abort", this.onRunAbort, ONCE);
  }

  /**
   * The stop of one step whose actor is `actor` (what its creator was given, or a plain call's
   * stop): a plain call's own stop (no second one for the step), else a stop that follows the
   * actor's AbortSignal (xstate's own actors). The run's abort reaches it too, until released.
   */
  link(actor: StepStop | { readonly signal: AbortSignal }): StepStop {
    const run = this.run;
    if (actor instanceof StepStop) {
      if (run?.aborted) actor.abort(run.reason);
      else if (run !== undefined && !actor.aborted) this.live.add(actor);
      return actor;
    }
    const signal = actor.signal;
    const stop = new StepStop();
    if (run?.aborted) stop.abort(run.reason);
    else if (signal.aborted) stop.abort(signal.reason);
    else {
      if (run !== undefined) this.live.add(stop);
      signal.addEventListener(
        "abort",
        () => {
          this.live.delete(stop);
          stop.abort(signal.reason);
        },
        ONCE,
      );
    }
    return stop;
  }

  /**
   * The step's effect is done with `stop` (it returned, or it was stopped and already aborted):
   * a later abort of the run no longer reaches it.
   */
  release(stop: StepStop): void {
    this.live.delete(stop);
  }

  /** The run ended: its signal's listener goes. */
  dispose(): void {
    if (this.onRunAbort) this.run?.removeEventListener("abort", this.onRunAbort);
    this.live.clear();
  }
}

/**
 * How a run is told to stop, in one place: `RunStop` (the run's own signal, the chart's stop
 * events, the fence its appends carry, and every durable step linked to it), `StepStop` (one
 * step's abort, whose AbortSignal is made only when read), `CallStop` (a plain call's), and
 * `Fence` (what the appender tells when the store refuses an append).
 */
import type { Actor } from "xstate";
import { isRunCancelledError, type OwnershipLostError, RunCancelledError } from "../../core/errors.ts";
import type { agentLoopMachine, StopEvent } from "../../machines/agentLoop.machine.ts";

/** One options object for every step's listener (not one allocated per step). */
const ONCE = Object.freeze({ once: true });

/** The run's lease as its appends use it: the token, and whom to tell once it is refused. */
export interface Fence {
  readonly token: number;
  /** Called once, when the store first refuses an append (the run stops its effects in flight). */
  onLost(error: OwnershipLostError): void;
  /** Called when the store refuses an append because someone asked to cancel the run (`cancelRun`). */
  onCancelled?(error: RunCancelledError): void;
}

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
 * Everything that stops one run. Told from outside that the run must end, the chart gets `CANCEL`
 * (control) or `LOST` (the fence), or `ABORT` for the caller's signal (`CANCEL` when its reason is
 * a cancellation: a sub-agent's parent was cancelled). The steps in flight are stopped first,
 * through the run's signal, so an effect sees the reason (a `RunCancelledError`, an
 * `OwnershipLostError`) rather than the chart stopping its actor. Told before the chart runs, the
 * event waits for its start.
 *
 * Each durable step's stop is linked to the run's signal ({@link step}): it aborts when the run's
 * signal aborts or its actor is stopped, with the reason of whichever came first (the run's when
 * both already have), as `AbortSignal.any([runSignal, actorSignal])` would. `AbortSignal.any` per
 * step cost the loop more than any other piece of its signal handling (each call registers a
 * weakly held dependant on the run's signal, swept only by the collector); here the run's signal
 * gets one listener for the whole run, which aborts the steps live at that moment.
 *
 * @example
 * const stop = new RunStop(runId, request.signal);
 * const fence = stop.fence(held.fence); // the appender's: a refused append stops the run
 * const detach = stop.start(actor); // the chart hears what was told before it started
 */
export class RunStop {
  private readonly controller = new AbortController();
  /** What the run's steps follow: the caller's signal and this run's own stops. */
  readonly signal: AbortSignal;
  private actor: Actor<typeof agentLoopMachine> | undefined;
  private waiting: StopEvent[] = [];

  /** Whether the run follows the caller's signal (this is its listener, removed by `dispose`). */
  private readonly following: boolean = false;

  /** The steps linked and not released yet. */
  private readonly live = new Set<StepStop>();
  /** The run's signal's one listener for its steps (registered at the first step). */
  private onRunAbort: (() => void) | undefined;
  private stepsLinked = false;

  constructor(
    private readonly runId: string,
    private readonly given: AbortSignal | undefined,
  ) {
    // One listener rather than AbortSignal.any([given, own]): on Node 20 that registers a weakly
    // held dependant, swept only by the collector, and cost a run about a tenth of a millisecond.
    this.signal = this.controller.signal;
    if (given === undefined) return;
    if (given.aborted) this.controller.abort(given.reason);
    else {
      given.addEventListener("abort", this, { once: true }); // handleEvent: no closure a run
      this.following = true;
    }
  }

  /** The caller's signal aborted: the run's signal aborts with its reason. */
  handleEvent(): void {
    this.controller.abort(this.given?.reason);
  }

  /** The run is over: a caller's signal that outlives it no longer holds it. */
  dispose(): void {
    if (this.following) this.given?.removeEventListener("abort", this);
  }

  /** A cancel request (`cancelRun`) reached the run. */
  cancel(reason: string): void {
    this.send(new RunCancelledError(this.runId, reason), { type: "CANCEL", reason });
  }

  /** Another owner has the run. */
  lose(error: Error): void {
    this.send(error, { type: "LOST", error });
  }

  /** The fence the run's appends carry: its token, and the run stopped when an append is refused. */
  fence(token: number): Fence {
    return new RunFence(token, this);
  }

  private send(reason: unknown, event: StopEvent): void {
    this.controller.abort(reason); // once: the first reason is the one the steps see
    if (this.actor === undefined) this.waiting.push(event);
    else if (this.actor.getSnapshot().status === "active") this.actor.send(event);
  }

  /** Binds the run's started chart: events told before go to it now, and the caller's signal from here on. */
  start(actor: Actor<typeof agentLoopMachine>): () => void {
    this.actor = actor;
    actor.start();
    for (const event of this.waiting.splice(0)) if (actor.getSnapshot().status === "active") actor.send(event);
    const given = this.given;
    if (given === undefined) return () => {};
    // Aborted before the run started, the steps see it (the model step returns aborted): only a cancellation is told.
    if (given.aborted) {
      if (isRunCancelledError(given.reason)) this.send(given.reason, { type: "CANCEL", reason: given.reason.reason });
      return () => {};
    }
    // A microtask later: the signals derived from the run's (a tool's) abort first, with the run's reason.
    const onAbort = () =>
      queueMicrotask(() => {
        if (actor.getSnapshot().status !== "active") return;
        const reason = given.reason;
        actor.send(isRunCancelledError(reason) ? { type: "CANCEL", reason: reason.reason } : { type: "ABORT", reason });
      });
    given.addEventListener("abort", onAbort, { once: true });
    return () => given.removeEventListener("abort", onAbort);
  }

  /**
   * The stop of one durable step whose actor is `actor` (what its creator was given, or a plain
   * call's stop): a plain call's own stop (no second one for the step), else a stop that follows
   * the actor's AbortSignal (xstate's own actors). The run's abort reaches it too, until
   * {@link release}d.
   */
  step(actor: StepStop | { readonly signal: AbortSignal }): StepStop {
    if (!this.stepsLinked) this.linkSteps();
    const run = this.signal;
    if (actor instanceof StepStop) {
      if (run.aborted) actor.abort(run.reason);
      else if (!actor.aborted && this.onRunAbort !== undefined) this.live.add(actor);
      return actor;
    }
    const signal = actor.signal;
    const stop = new StepStop();
    if (run.aborted) stop.abort(run.reason);
    else if (signal.aborted) stop.abort(signal.reason);
    else {
      if (this.onRunAbort !== undefined) this.live.add(stop);
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

  /** The run's steps are over: the run's signal no longer reaches any. */
  releaseSteps(): void {
    if (this.onRunAbort) this.signal.removeEventListener("abort", this.onRunAbort);
    this.live.clear();
  }

  /**
   * Registered at the first step, after the run's own listeners (the chart's ABORT): a step then
   * aborts after them, as a dependant of AbortSignal.any does.
   */
  private linkSteps(): void {
    this.stepsLinked = true;
    const run = this.signal;
    if (run.aborted) return;
    this.onRunAbort = () => {
      const steps = [...this.live];
      this.live.clear();
      for (const step of steps) step.abort(run.reason);
    };
    run.addEventListener("abort", this.onRunAbort, ONCE);
  }
}

/** The run's fence: its token, and the run stopped when an append is refused (another owner, a cancel request). */
class RunFence implements Fence {
  constructor(
    readonly token: number,
    private readonly stop: RunStop,
  ) {}

  onLost(e: Error): void {
    this.stop.lose(e);
  }

  onCancelled(e: RunCancelledError): void {
    this.stop.cancel(e.reason);
  }
}

/**
 * The stop signals of the runs in hand: each run follows a signal of its own, aborted when the
 * scheduler's is, so however many runs a look starts, the scheduler's signal holds one listener.
 */
export class RunStops {
  private readonly inHand = new Set<AbortController>();

  constructor(private readonly given: AbortSignal | undefined) {
    given?.addEventListener("abort", this, { once: true }); // handleEvent: one listener for all runs
  }

  /** The scheduler's signal aborted: every run in hand is told, with its reason. */
  handleEvent(): void {
    for (const stop of this.inHand) stop.abort(this.given?.reason);
  }

  /** A run's own stop, or undefined when the scheduler has no signal to follow. */
  open(): AbortController | undefined {
    if (this.given === undefined) return undefined;
    const stop = new AbortController();
    if (this.given.aborted) stop.abort(this.given.reason);
    else this.inHand.add(stop);
    return stop;
  }

  /** The run is over. */
  close(stop: AbortController): void {
    this.inHand.delete(stop);
  }

  /** The scheduler is over: its signal, if it outlives it, no longer holds it. */
  dispose(): void {
    this.given?.removeEventListener("abort", this);
  }
}

/**
 * The order in which the calls of one model response journal their starts: the call's index in
 * the response, whatever order their checks (an async `validateInput`, an approval callback, the
 * run letting the event loop breathe) finish in. So the journal of a response reads the same on
 * every run: first what each call journals before its tool runs (its `frame.started`, or the
 * `call.settled` of a refusal, or its approval's decision), in call order; then, once every call
 * of the batch has done so, the tools run and their results follow in the order they finish.
 *
 * A call "passes" once it has journaled its start, or knows it journals none now (served from the
 * journal, waiting for a person, failed); the call after it then goes. Every way out of a call's
 * check, approval and run passes it, so no call waits for one that will never go.
 */
export class CallOrder {
  /** Every call before this index has passed. */
  private next = 0;
  /** Calls past `next` that passed already (their start came before an earlier call's). */
  private ahead: Set<number> | undefined;
  /** A call waiting for its turn, by index (one at most a call). */
  private turns: Map<number, () => void> | undefined;
  /** Calls whose tool waits until every call before `end` has passed (its batch). */
  private batches: { readonly end: number; readonly go: () => void }[] | undefined;

  constructor(
    /** The turn (model response) these calls belong to. */
    readonly turn: number,
  ) {}

  /**
   * Undefined when call `index` may journal its start now (every call before it passed), else a
   * promise that resolves when it may. Undefined is the common case: no promise is made.
   */
  turnOf(index: number): Promise<void> | undefined {
    if (index <= this.next) return undefined;
    return new Promise<void>((go) => {
      this.turns ??= new Map();
      this.turns.set(index, go);
    });
  }

  /** Call `index` journaled its start, or has none to journal now. Passing twice is harmless. */
  pass(index: number): void {
    if (index < this.next) return;
    if (index > this.next) {
      (this.ahead ??= new Set()).add(index);
      return;
    }
    this.next++;
    while (this.ahead?.delete(this.next)) this.next++;
    const turn = this.turns?.get(this.next);
    if (turn !== undefined) {
      this.turns?.delete(this.next);
      turn();
    }
    const batches = this.batches;
    if (batches === undefined) return;
    for (let i = batches.length - 1; i >= 0; i--) {
      const batch = batches[i] as { end: number; go: () => void };
      if (batch.end > this.next) continue;
      batches.splice(i, 1);
      batch.go();
    }
  }

  /**
   * Undefined once every call before `end` has passed, else a promise that resolves then: a tool
   * runs only once the starts of its whole batch are journaled.
   */
  allBefore(end: number): Promise<void> | undefined {
    if (end <= this.next) return undefined;
    return new Promise<void>((go) => {
      (this.batches ??= []).push({ end, go });
    });
  }
}

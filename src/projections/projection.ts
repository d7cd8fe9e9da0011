import type { JournalEntry } from "../events/types.ts";

/** A projection is an initial state and a pure step: nothing else. A fold never awaits. */
export interface Projection<S> {
  initial(): S;
  evolve(state: S, entry: JournalEntry): S;
}

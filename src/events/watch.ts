/**
 * Who is waiting for a run's next append, in this process: what a store's `watch` hands out and
 * tells after each append it makes (see `EventStore.watch`).
 */
export class AppendWatchers {
  private readonly byRun = new Map<string, Set<() => void>>();
  /** Watchers of every run (a poller that cannot tell runs apart wakes them all). */
  get size(): number {
    return this.byRun.size;
  }

  add(runId: string, onAppend: () => void): () => void {
    let set = this.byRun.get(runId);
    if (set === undefined) {
      set = new Set();
      this.byRun.set(runId, set);
    }
    set.add(onAppend);
    const mine = set;
    return () => {
      mine.delete(onAppend);
      if (mine.size === 0 && this.byRun.get(runId) === mine) this.byRun.delete(runId);
    };
  }

  /** Tells the watchers of `runId` (every run's when undefined). */
  notify(runId?: string): void {
    const sets = runId === undefined ? [...this.byRun.values()] : [this.byRun.get(runId)];
    for (const set of sets) {
      if (set === undefined) continue;
      for (const onAppend of [...set]) {
        try {
          onAppend();
        } catch {
          // A watcher's failure is its own.
        }
      }
    }
  }
}

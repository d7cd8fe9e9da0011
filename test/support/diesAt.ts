import type { EventStore } from "../../src/events/store.ts";

/**
 * A store whose process "dies" at a run's interruption: that append and every later one fail, so
 * the run is left as a process killed after journaling its turn's waits and before stopping for
 * them would leave it (the loop lets go of the run: it is stalled at once).
 */
export function diesAtInterruption(inner: EventStore): EventStore {
  let dead = false;
  return {
    ...inner,
    async append(runId, entries, options) {
      if (dead || entries.some((e) => e.type === "run.interrupted")) {
        dead = true;
        throw new Error("the process died");
      }
      return inner.append(runId, entries, options);
    },
  };
}

import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { Tool } from "../../src/runtime/config.ts";

/** A journal on a memory store that keeps JSON text, as a JSON store would. */
export const jsonJournal = (store: EventStore = memoryStore({ json: true })) => createJournal({ store });

/** A store that fails every append after the first `k` (a crash at append point k). */
export function crashingStore(inner: EventStore, k: number): EventStore & { appends: number } {
  let appends = 0;
  return {
    ...inner,
    get appends() {
      return appends;
    },
    async append(runId, entries, options) {
      if (appends >= k) throw new Error(`simulated crash before append ${appends + 1}`);
      appends++;
      return inner.append(runId, entries, options);
    },
    read: inner.read.bind(inner),
    listRuns: inner.listRuns.bind(inner),
    compact: inner.compact.bind(inner),
    close: inner.close.bind(inner),
  };
}

/** Tools that count their executions per step id. */
export function countingTools() {
  const executions = new Map<string, number>();
  const count = (stepId: string) => executions.set(stepId, (executions.get(stepId) ?? 0) + 1);
  const tools: Record<string, Tool> = {
    add: {
      description: "adds a and b",
      execute: (input, { stepId }) => {
        count(stepId);
        const { a, b } = input as { a: number; b: number };
        return { sum: a + b };
      },
    },
    echo: {
      description: "echoes its input after a delay",
      execute: async (input, { stepId }) => {
        count(stepId);
        const { text, delayMs = 0 } = input as { text: string; delayMs?: number };
        await new Promise((r) => setTimeout(r, delayMs));
        return { text };
      },
    },
  };
  return { tools, executions };
}

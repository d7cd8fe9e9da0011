import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { rebuildToolCallLog } from "../../src/runtime/base/readers.ts";

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

/** Both shapes of a run's log rebuilt from its journal, as JSON text (byte-identical means equal text). */
export async function logsOf(journal: Journal, runId: string): Promise<{ full: string; lean: string }> {
  const full = JSON.stringify(await rebuildToolCallLog(journal, runId, "full"));
  const lean = JSON.stringify(await rebuildToolCallLog(journal, runId, "lean"));
  return { full, lean };
}

/** The frames of a journal by how far they got: completed (output or failed), or only started. */
export function frameProgress(entries: readonly JournalEntry[]): { completed: Set<string>; open: Set<string> } {
  const completed = new Set<string>();
  const open = new Set<string>();
  for (const e of entries) {
    if (e.type === "frame.started") open.add(e.data.frameId);
    if (e.type === "frame.completed") {
      open.delete(e.data.frameId);
      completed.add(e.data.frameId);
    }
  }
  return { completed, open };
}

/** Adds each count of `more` to `into` (executions of a crashed attempt and of its resume). */
export function addCounts(into: Map<string, number>, more: ReadonlyMap<string, number>): Map<string, number> {
  for (const [k, n] of more) into.set(k, (into.get(k) ?? 0) + n);
  return into;
}

/** Calls `task` for 0..count-1, at most `concurrency` at a time; resolves to the results in index order. */
export async function mapConcurrently<T>(
  count: number,
  concurrency: number,
  task: (index: number) => Promise<T>,
): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
  return results;
}

/** One frame's attempts as a journal shows them (see {@link attemptsOf}). */
export interface FrameAttempts {
  /** What the frame runs (`model`, `tool:<name>`), as its first `frame.started` says. */
  effect: string;
  /** `frame.started` entries: one per attempt that was run (write-ahead). */
  started: number;
  /** The attempt numbers of its `attempt.failed` entries, in journal order. */
  failed: number[];
  completed: boolean;
  /** Its last entry is a `frame.started`: that attempt's outcome is not recorded. */
  unknown: boolean;
}

/** Every frame's attempts, by frame id. */
export function attemptsOf(entries: readonly JournalEntry[]): Map<string, FrameAttempts> {
  const frames = new Map<string, FrameAttempts>();
  const of = (id: string, effect = "") => {
    let f = frames.get(id);
    if (!f) frames.set(id, (f = { effect, started: 0, failed: [], completed: false, unknown: false }));
    return f;
  };
  for (const e of entries) {
    if (e.type === "frame.started") {
      const f = of(e.data.frameId, e.data.effect);
      f.started++;
      f.unknown = true;
    } else if (e.type === "attempt.failed") {
      const f = of(e.data.frameId);
      f.failed.push(e.data.attempt);
      f.unknown = false;
    } else if (e.type === "frame.completed") {
      const f = of(e.data.frameId);
      f.completed = true;
      f.unknown = false;
    }
  }
  return frames;
}

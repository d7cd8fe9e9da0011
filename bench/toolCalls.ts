/**
 * One model response asking for thousands of tool calls: the whole run (the calls dispatched,
 * run, journaled and fed back, then the final answer) for 500, 4,000 and 10,000 calls, on the
 * memory and the SQLite journal. Prints the time, its ratio to 500 calls on the same journal
 * (linear: 8 and 20), and the longest stretch the event loop was blocked (perf_hooks
 * monitorEventLoopDelay: a worker whose loop is blocked that long misses its lease renewals).
 * Target: 4,000 calls within 10× the time of 500. Runs of up to 4,000 calls are measured three
 * times (the best counts: a shared machine only ever adds time), larger ones once. Also prints
 * the store appends (commits) per call: appends queued while one commits go out together.
 *
 *   node --import tsx bench/toolCalls.ts [calls…]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createJournal, openSqliteJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import type { Journal } from "../src/events/spi.ts";
import type { ModelResponse } from "../src/events/types.ts";
import type { Model } from "../src/models/types.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printResult, printTable } from "./support.ts";

const SIZES = process.argv.slice(2).map(Number).filter(Number.isInteger);
const CALLS = SIZES.length > 0 ? SIZES : [500, 4_000, 10_000];

/** Asks for `calls` lookups in its first response, then answers. */
function floodingModel(calls: number): Model {
  return {
    async generate({ messages }): Promise<ModelResponse> {
      if (messages.some((m) => m.role === "assistant")) return { content: "done", toolCalls: [] };
      return {
        toolCalls: Array.from({ length: calls }, (_, i) => ({ id: `c${i}`, name: "lookup", input: { n: i } })),
      };
    },
  };
}

let runs = 0;
async function measure(calls: number, opened: Journal): Promise<{ ms: number; stallMs: number; appends: number }> {
  let appends = 0; // store appends: one transaction (one commit) each
  const store = opened.store;
  const journal: Journal = {
    ...opened,
    store: {
      ...store,
      append: (...args) => {
        appends++;
        return store.append(...args);
      },
    },
  };
  const loop = agentLoop$({
    id: "flood",
    model: floodingModel(calls),
    tools: { lookup: { description: "looks n up", execute: (input: { n: number }) => ({ n: input.n, ok: true }) } },
    maxToolCallsPerResponse: calls,
  });
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  await new Promise((resolve) => setTimeout(resolve, 25)); // the monitor misses a stall before its first tick
  const started = performance.now();
  const out = await loop.run({ runId: `flood-${calls}-${runs++}`, input: "go", journal });
  const ms = performance.now() - started;
  // A run that never yields to the event loop is one long stall: let the monitor's timer fire once more to see it.
  await new Promise((resolve) => setTimeout(resolve, 25));
  delay.disable();
  if (out.toolCallLog.length !== calls) throw new Error(`expected ${calls} log entries, got ${out.toolCallLog.length}`);
  return { ms, stallMs: delay.max / 1e6, appends };
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-tool-calls-"));
const rows: Record<string, string | number>[] = [];
try {
  await measure(200, createJournal({ store: memoryStore() })); // warm-up: JIT, module loading
  for (const [name, open] of [
    ["memory", () => createJournal({ store: memoryStore() })],
    ["sqlite", (calls: number) => openSqliteJournal(join(dir, `calls-${calls}.db`))],
  ] as const) {
    let base: number | undefined;
    for (const calls of CALLS) {
      const journal = open(calls);
      try {
        let { ms, stallMs, appends } = await measure(calls, journal);
        for (let again = calls <= 4_000 ? 2 : 0; again > 0; again--) {
          const next = await measure(calls, journal);
          if (next.ms < ms) ({ ms, stallMs, appends } = next);
        }
        base ??= ms;
        rows.push({
          journal: name,
          calls,
          "time ms": ms,
          [`× ${CALLS[0]}`]: ms / base,
          "calls/ms": calls / ms,
          "longest stall ms": stallMs,
          "appends per call": appends / calls,
        });
      } finally {
        await journal.close?.();
      }
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
printTable(
  `One model response with many tool calls (the run, end to end; linear would be ${CALLS.map((c) => (c / (CALLS[0] ?? 1)).toFixed(0)).join(" : ")})`,
  rows,
);
const first = CALLS[0] ?? 1;
const last = CALLS.includes(4_000) ? 4_000 : undefined;
const scaling = Object.fromEntries(
  ["memory", "sqlite"].map((journal) => {
    const at = (calls: number | undefined) => rows.find((r) => r.journal === journal && r.calls === calls)?.["time ms"];
    const a = at(first);
    const b = at(last);
    return [journal, typeof a === "number" && typeof b === "number" ? b / a : null];
  }),
);
printResult("toolCalls", {
  target: `4,000 calls within 10× the time of ${first}`,
  scaling,
  met: Object.values(scaling).every((x) => x === null || x <= 10),
});

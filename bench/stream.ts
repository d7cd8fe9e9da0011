/**
 * Streaming's cost (issue 16): `followRun` replaying a completed 200-turn run against resuming it
 * (`loop.run` on the completed run: read, validate, fold, return; target: replay ≤ 1×), the fold's
 * cost per event, and what `loop.stream` adds to a run over `loop.run` per journaled event.
 * Time to first delta (through Loom vs the model's own stream, target ≤ 1.05× + 1 ms) and cost
 * per delta need a streaming model: add them to `deltaRows` once `Model.stream` is wired in.
 *
 *   node --import tsx bench/stream.ts
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createJournal, openSqliteJournal, readJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import type { Journal } from "../src/events/spi.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import { runEventsOf } from "../src/projections/events.ts";
import { agentLoop$ } from "../src/runtime/agentLoop.ts";
import type { Tool } from "../src/runtime/config.ts";
import { followRun } from "../src/runtime/follow.ts";
import { printTable, rng, toolOutput } from "./support.ts";

const TURNS = 200;
const REPEATS = 15;
const next = rng(16);
const outputs = Array.from({ length: TURNS }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));
const lookup: Tool = { description: "looks things up", execute: (input) => outputs[(input as { n: number }).n] };
const model = scriptedModel(({ turn }) =>
  turn < TURNS
    ? { content: `turn ${turn}`, toolCalls: [{ id: `c${turn}`, name: "lookup", input: { n: turn } }] }
    : { content: "done", toolCalls: [] },
);
const loop = agentLoop$({ id: "bench", model, tools: { lookup }, maxIterations: TURNS + 1 });

/** Best of REPEATS, in ms. */
async function best(fn: () => Promise<unknown>): Promise<number> {
  let min = Number.POSITIVE_INFINITY;
  for (let i = 0; i < REPEATS; i++) {
    const t = performance.now();
    await fn();
    min = Math.min(min, performance.now() - t);
  }
  return min;
}

async function replayRows(name: string, journal: Journal) {
  await loop.run({ runId: "r", input: "go", journal });
  const entries = await readJournal(journal, "r");
  const events = runEventsOf(entries).length;
  const resume = await best(() => loop.run({ runId: "r", journal }));
  const replay = await best(async () => {
    for await (const _ of followRun(journal, "r")) {
      // every event, as a reconnecting client from cursor 0 gets them
    }
  });
  const lean = await best(async () => {
    for await (const _ of followRun(journal, "r", { mode: "lean" })) {
      // the same, outputs as digests
    }
  });
  const fold = await best(async () => runEventsOf(entries));
  return {
    journal: name,
    entries: entries.length,
    events,
    "resume ms": resume,
    "followRun ms": replay,
    "followRun lean ms": lean,
    "replay / resume": replay / resume,
    "fold µs/event": (fold * 1000) / events,
  };
}

/**
 * What streaming adds to a live run: `loop.stream` (read by a consumer) and `run({ onEvent })` vs
 * `loop.run`, on the memory journal. Interleaved after a warm-up (best of each), so neither the JIT
 * nor a neighbour on the machine favours one (the order turns each round).
 */
async function liveRows() {
  let i = 0;
  const fresh = () => createJournal({ store: memoryStore() });
  let told = 0;
  let streamed = 0;
  const variants = {
    run: () => loop.run({ runId: `run-${i++}`, input: "go", journal: fresh() }),
    onEvent: () => loop.run({ runId: `cb-${i++}`, input: "go", journal: fresh(), onEvent: () => void told++ }),
    stream: async () => {
      const stream = loop.stream({ runId: `stream-${i++}`, input: "go", journal: fresh() });
      for await (const _ of stream) streamed++;
      await stream.output;
    },
  };
  const bestOf = { run: Number.POSITIVE_INFINITY, onEvent: Number.POSITIVE_INFINITY, stream: Number.POSITIVE_INFINITY };
  for (let round = 0; round < REPEATS + 3; round++) {
    const order = (["run", "onEvent", "stream"] as const).map(
      (_, k, all) => all[(k + round) % all.length] as keyof typeof variants,
    );
    for (const name of order) {
      const t = performance.now();
      await variants[name]();
      if (round >= 3) bestOf[name] = Math.min(bestOf[name], performance.now() - t);
    }
  }
  const events = streamed / (REPEATS + 3);
  const added = (ms: number) => ((ms - bestOf.run) * 1000) / events;
  return [
    { "": "loop.run", "run ms": bestOf.run, "events told": 0, "added µs/event": 0 },
    {
      "": "run({ onEvent })",
      "run ms": bestOf.onEvent,
      "events told": told / (REPEATS + 3),
      "added µs/event": added(bestOf.onEvent),
    },
    { "": "loop.stream", "run ms": bestOf.stream, "events told": events, "added µs/event": added(bestOf.stream) },
  ];
}

/**
 * Time to first delta and cost per delta: through Loom (`loop.stream`) vs the model's own stream.
 * Empty until `Model.stream` is wired into the loop; rows are `{ model, "model's own ms",
 * "through Loom ms", ratio, "µs/delta" }`.
 */
async function deltaRows(): Promise<Record<string, string | number>[]> {
  return [];
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-stream-"));
try {
  const sqlite = openSqliteJournal(join(dir, "stream.db"));
  printTable(
    `followRun replay of a completed ${TURNS}-turn run vs its resume (best of ${REPEATS}; target replay / resume ≤ 1)`,
    [await replayRows("memory", createJournal({ store: memoryStore() })), await replayRows("sqlite", sqlite)],
  );
  await sqlite.close();
  printTable(`What watching adds to a live ${TURNS}-turn run (memory journal, best of ${REPEATS})`, await liveRows());
  const deltas = await deltaRows();
  if (deltas.length > 0) printTable("Time to first delta and cost per delta", deltas);
  else console.log("\nTime to first delta: needs Model.stream in the loop (see deltaRows).");
} finally {
  rmSync(dir, { recursive: true, force: true });
}

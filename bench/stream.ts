/**
 * Streaming's cost (issue 16): `followRun` replaying a completed 200-turn run against resuming it
 * (`loop.run` on the completed run: read, validate, fold, return; target: replay ≤ 1×; wall and
 * CPU time, the two alternated in one process), the fold's
 * cost per event, and what `loop.stream` adds to a run over `loop.run` per journaled event.
 * Time to first delta (through Loom vs the model's own stream, target ≤ 1.05× + 1 ms) and the
 * cost of each delta, with a streaming model whose first chunk comes after 20 ms.
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
import type { GenerateRequest, Model, ModelStreamPart } from "../src/models/types.ts";
import { runEventsOf } from "../src/projections/events.ts";
import type { Tool } from "../src/runtime/base/config.ts";
import { type AgentLoop, agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { followRun } from "../src/runtime/streaming/follow.ts";
import { printResult, printTable, rng, toolOutput } from "./support.ts";

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

/** CPU time of this process so far (user + system), in ms: what a shared machine's neighbours do not add. */
const cpuMs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/**
 * Resume vs `followRun` replay (and its lean form) of the same completed run, alternated within
 * each round (the order turns every round) after a warm-up: best of each, wall and CPU time.
 */
async function replayRows(name: string, journal: Journal) {
  await loop.run({ runId: "r", input: "go", journal });
  const entries = await readJournal(journal, "r");
  const events = runEventsOf(entries).length;
  const variants = {
    resume: () => loop.run({ runId: "r", journal }),
    replay: async () => {
      for await (const _ of followRun(journal, "r")) {
        // every event, as a reconnecting client from cursor 0 gets them
      }
    },
    lean: async () => {
      for await (const _ of followRun(journal, "r", { mode: "lean" })) {
        // the same, outputs as digests
      }
    },
  };
  const names = Object.keys(variants) as (keyof typeof variants)[];
  const wall = { resume: Number.POSITIVE_INFINITY, replay: Number.POSITIVE_INFINITY, lean: Number.POSITIVE_INFINITY };
  const cpu = { ...wall };
  for (let round = 0; round < REPEATS * 2 + 3; round++) {
    for (let k = 0; k < names.length; k++) {
      const variant = names[(k + round) % names.length] as keyof typeof variants;
      const c = cpuMs();
      const t = performance.now();
      await variants[variant]();
      if (round < 3) continue;
      wall[variant] = Math.min(wall[variant], performance.now() - t);
      cpu[variant] = Math.min(cpu[variant], cpuMs() - c);
    }
  }
  const fold = await best(async () => runEventsOf(entries));
  return {
    journal: name,
    entries: entries.length,
    events,
    "resume ms": wall.resume,
    "followRun ms": wall.replay,
    "followRun lean ms": wall.lean,
    "replay / resume": wall.replay / wall.resume,
    "resume cpu ms": cpu.resume,
    "followRun cpu ms": cpu.replay,
    "replay / resume cpu": cpu.replay / cpu.resume,
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

const DELTAS = 2000;
const FIRST_CHUNK_MS = 20;

/**
 * A streaming model like a provider's: the first chunk after `firstMs` (the provider's latency),
 * then `deltas` text deltas as fast as they are read, then the response.
 */
function streamingModel(firstMs: number, deltas: number): Model {
  const response = { content: "x".repeat(deltas), toolCalls: [] };
  return {
    generate: async () => response,
    async *stream(request: GenerateRequest): AsyncGenerator<ModelStreamPart> {
      if (firstMs > 0) await new Promise((r) => setTimeout(r, firstMs));
      for (let i = 0; i < deltas; i++) {
        request.signal.throwIfAborted();
        yield { type: "text-delta", delta: "x" };
      }
      yield { type: "response", response };
    },
  };
}

/** Ms from the call to the model's first delta, read straight from its stream. */
async function ownFirstDelta(model: Model): Promise<number> {
  const t = performance.now();
  const stream = (model.stream as NonNullable<Model["stream"]>)({
    messages: [{ role: "user", content: "go" }],
    tools: [],
    signal: new AbortController().signal,
  });
  for await (const part of stream) if (part.type === "text-delta") break;
  return performance.now() - t;
}

/**
 * Ms from `loop.stream` to its first text-delta event: a new run (prepare, run.started,
 * frame.started first) of a loop the program already has, as a server defines its loops once and
 * runs one per request. (A loop's first run also builds its statechart: about 0.6 ms more.)
 */
async function loomFirstDelta(loop: AgentLoop, journal: Journal, runId: string): Promise<number> {
  const t = performance.now();
  const stream = loop.stream({ runId, input: "go", journal });
  let first = Number.NaN;
  for await (const event of stream)
    if (event.type === "text-delta" && Number.isNaN(first)) first = performance.now() - t;
  await stream.output;
  return first;
}

/** Whole streamed one-turn runs, with `deltas` deltas: what each delta adds, through loop.stream. */
async function runMs(deltas: number, runId: string): Promise<number> {
  const loop = agentLoop$({ id: "cost", model: streamingModel(0, deltas) });
  const t = performance.now();
  const stream = loop.stream({ runId, input: "go", journal: createJournal({ store: memoryStore() }) });
  for await (const _ of stream);
  await stream.output;
  return performance.now() - t;
}

/**
 * Time to first delta through Loom (`loop.stream` of a new run) vs the model's own stream, with a
 * provider-like first chunk after 20 ms (target ≤ 1.05× + 1 ms), and the cost of each delta.
 */
async function deltaRows(): Promise<Record<string, string | number>[]> {
  const model = streamingModel(FIRST_CHUNK_MS, 10);
  const loop = agentLoop$({ id: "ttfd", model });
  await loomFirstDelta(loop, createJournal({ store: memoryStore() }), "ttfd-warm"); // its chart built once
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  const rows: Record<string, string | number>[] = [];
  for (const [name, journalOf] of [
    ["memory", () => createJournal({ store: memoryStore() })],
    ["sqlite (synchronous=full)", () => openSqliteJournal(join(dir, `ttfd-${Math.random()}.db`))],
  ] as const) {
    const own: number[] = [];
    const loom: number[] = [];
    for (let i = 0; i < REPEATS; i++) {
      own.push(await ownFirstDelta(model));
      const journal = journalOf();
      loom.push(await loomFirstDelta(loop, journal, `ttfd-${i}`));
      await (journal as { close?: () => Promise<void> }).close?.();
    }
    const o = median(own);
    const l = median(loom);
    rows.push({
      journal: name,
      "model's own ms": o,
      "through Loom ms": l,
      "Loom − own ms": l - o,
      "× own": l / o,
      "within 1.05× + 1 ms": l <= o * 1.05 + 1 ? "yes" : "no",
    });
  }
  await runMs(DELTAS, "warm");
  const many: number[] = [];
  const none: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    many.push(await runMs(DELTAS, `many-${i}`));
    none.push(await runMs(0, `none-${i}`));
  }
  const perDelta = ((median(many) - median(none)) / DELTAS) * 1000;
  rows.push({
    journal: `cost per delta (${DELTAS} deltas, memory)`,
    "model's own ms": "",
    "through Loom ms": "",
    "Loom − own ms": "",
    "× own": "",
    "within 1.05× + 1 ms": `${perDelta.toFixed(2)} µs`,
  });
  return rows;
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-stream-"));
try {
  const sqlite = openSqliteJournal(join(dir, "stream.db"));
  const replay = [
    await replayRows("memory", createJournal({ store: memoryStore() })),
    await replayRows("sqlite", sqlite),
  ];
  printTable(
    `followRun replay of a completed ${TURNS}-turn run vs its resume (alternated, best of ${REPEATS * 2}; target replay / resume ≤ 1)`,
    replay,
  );
  await sqlite.close();
  printTable(`What watching adds to a live ${TURNS}-turn run (memory journal, best of ${REPEATS})`, await liveRows());
  const deltas = await deltaRows();
  printTable(
    `Time to first delta, a new run through loop.stream vs the model's own stream (first chunk after ${FIRST_CHUNK_MS} ms; median of ${REPEATS}), and cost per delta`,
    deltas,
  );
  const replayVsResume = Math.max(...replay.map((r) => Number(r["replay / resume"])));
  const firstDeltaMet = deltas.filter((r) => r["within 1.05× + 1 ms"] === "yes" || r["within 1.05× + 1 ms"] === "no");
  printResult("stream", {
    targets: { replayVsResume: "≤ 1", firstDelta: "≤ 1.05× the model's own + 1 ms" },
    replayVsResume,
    firstDeltaWithin: firstDeltaMet.every((r) => r["within 1.05× + 1 ms"] === "yes"),
    met: replayVsResume <= 1 && firstDeltaMet.every((r) => r["within 1.05× + 1 ms"] === "yes"),
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * The viewer on a 2,000-turn run (one tool call a turn, outputs of 0.5–2 kB, run by the real
 * loop into a SQLite journal file):
 * - memory: the heap time travel takes (the run's `RunState` kept every 32 entries, made by
 *   immer, untouched frames shared), beside a `RunState` per entry made the same way (whose
 *   frame table every entry copies), measured on a 500-turn run, where that is affordable;
 * - time: the run page served over HTTP (`GET /runs/<id>`: read, fold, render) against
 *   `loom show <runId>` on the same file, both in this process, median of 15 after a warm-up.
 *   Target: the page under 2× `loom show`. Then the time-travel page (its first load builds every
 *   state) and one slider move.
 *
 *   node --import tsx bench/viewer.ts
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { produce } from "immer";
import { main } from "../src/cli/main.ts";
import { agentLoop$, openSqliteJournal, readJournal, scriptedModel } from "../src/index.ts";
import { agentLoopMachine, type JournalEntry, type RunState } from "../src/journal.ts";
import { runStateProjection } from "../src/projections/runState.ts";
import { Pages } from "../src/viewer/routes.ts";
import { startViewer } from "../src/viewer/server.ts";
import { buildTravel } from "../src/viewer/travel.ts";
import { printTable, rng, toolOutput } from "./support.ts";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const TURNS = 2_000;
const SMALL = 500;
const dir = mkdtempSync(join(tmpdir(), "loom-bench-viewer-"));
const db = join(dir, "loom.db");

async function record(runId: string, turns: number): Promise<void> {
  const next = rng(19);
  const outputs = Array.from({ length: turns }, () => toolOutput(next, 500 + Math.floor(next() * 1_500)));
  const journal = openSqliteJournal(db);
  try {
    const loop = agentLoop$({
      id: "bench",
      model: scriptedModel(({ turn }) =>
        turn < turns
          ? {
              content: `turn ${turn}`,
              toolCalls: [{ id: `c${turn}`, name: "search", input: { q: `query ${turn}` } }],
              usage: { inputTokens: 100 + turn, outputTokens: 20 },
            }
          : { content: "done", toolCalls: [] },
      ),
      tools: {
        search: { description: "searches", execute: (_input, { stepId }) => outputs[Number(stepId.split(":")[1])] },
      },
      maxIterations: turns + 1,
      toolCallLog: "lean",
    });
    await loop.run({ runId, journal, input: "go" });
  } finally {
    await journal.close();
  }
}

const heap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};
const MB = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`;

async function entriesOf(runId: string): Promise<JournalEntry[]> {
  const journal = openSqliteJournal(db, { readonly: true });
  try {
    return await readJournal(journal, runId);
  } finally {
    await journal.close();
  }
}

/** Heap taken by `build()`'s result, kept alive until measured. */
function heapOf(build: () => unknown): { bytes: number; ms: number } {
  const before = heap();
  const started = performance.now();
  const kept = build();
  const ms = performance.now() - started;
  const bytes = heap() - before;
  if (kept === undefined) throw new Error("nothing built");
  return { bytes, ms };
}

/** The flat RunState, one per entry, each made from the one before by immer. */
function flatStates(entries: readonly JournalEntry[]): RunState[] {
  const states: RunState[] = [runStateProjection.initial()];
  for (const entry of entries) {
    states.push(
      produce(states[states.length - 1] as RunState, (draft) => {
        runStateProjection.evolve(draft as RunState, entry);
      }),
    );
  }
  return states;
}

async function median(times: number, fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 3; i++) await fn();
  const ms: number[] = [];
  for (let i = 0; i < times; i++) {
    const started = performance.now();
    await fn();
    ms.push(performance.now() - started);
  }
  return ms.sort((a, b) => a - b)[Math.floor(ms.length / 2)] as number;
}

const started = performance.now();
await record("big", TURNS);
await record("small", SMALL);
console.log(`recorded runs of ${TURNS} and ${SMALL} turns in ${((performance.now() - started) / 1000).toFixed(1)} s`);

const big = await entriesOf("big");
const small = await entriesOf("small");
const journalBytes = (entries: readonly JournalEntry[]) => entries.reduce((n, e) => n + JSON.stringify(e).length, 0);
const memory = [
  {
    run: `${TURNS} turns`,
    entries: big,
    how: "RunState every 32 entries (immer)",
    build: () => buildTravel("big", big),
  },
  {
    run: `${SMALL} turns`,
    entries: small,
    how: "RunState every 32 entries (immer)",
    build: () => buildTravel("small", small),
  },
  { run: `${SMALL} turns`, entries: small, how: "flat RunState per entry (immer)", build: () => flatStates(small) },
].map(({ run, entries, how, build }) => {
  const { bytes, ms } = heapOf(build);
  return {
    run,
    entries: entries.length,
    "states kept": how,
    "heap after − before": MB(bytes),
    "per entry": `${(bytes / entries.length / 1024).toFixed(2)} kB`,
    "journal (JSON)": MB(journalBytes(entries)),
    "build ms": Math.round(ms),
  };
});
printTable("Time travel: heap taken by a state per entry (gc before and after)", memory);

const readonly = openSqliteJournal(db, { readonly: true });
const viewer = await startViewer({ journal: readonly });
const io = { stdout: { write: () => true }, stderr: { write: () => true }, cwd: dir };
try {
  const page = async (path: string) => {
    const res = await fetch(viewer.url + path);
    if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
    return (await res.text()).length;
  };
  const show = await median(15, () => main(["show", "big", "--db", db], io));
  const run = await median(15, () => page("/runs/big"));
  const pageBytes = await page("/runs/big");
  const coldStarted = performance.now();
  await page("/runs/big/travel?at=100");
  const travelCold = performance.now() - coldStarted;
  const slider = await median(15, () => page(`/runs/big/travel/at/${Math.floor(big.length / 2)}`));
  // The live page per append: before, its script fetched ?part=run (the run read and folded again);
  // now the viewer keeps the run and renders the part from it (the appended entry read and folded once).
  const pages = new Pages({ journal: readonly, actions: undefined, machine: agentLoopMachine, source: db, token: "" });
  const fresh = await median(15, () => pages.run("big", true));
  const render = await pages.liveRun("big");
  const last = big.at(-1)?.seq ?? 0;
  if (render === undefined) throw new Error("no run big");
  const kept = await median(15, () => render(last));
  // The slider's part made in this process (no HTTP): what the viewer spends per move, transfer aside.
  const mid = Math.floor(big.length / 2);
  await pages.travel("big", 0, true); // reads the logs once
  const sliderPart = await median(15, () => pages.travel("big", mid, true));
  printTable(`Render time, ${TURNS}-turn run (${big.length.toLocaleString("en-US")} entries), median of 15`, [
    { what: "loom show big (open, read, fold, print)", ms: show.toFixed(1), "× loom show": "1.00" },
    {
      what: `run page GET /runs/big (${MB(pageBytes)} of HTML)`,
      ms: run.toFixed(1),
      "× loom show": (run / show).toFixed(2),
    },
    {
      what: "time-travel page, first load (builds every state)",
      ms: travelCold.toFixed(1),
      "× loom show": (travelCold / show).toFixed(2),
    },
    {
      what: "slider move: GET /runs/big/travel/at/<mid>",
      ms: slider.toFixed(1),
      "× loom show": (slider / show).toFixed(2),
    },
    {
      what: "slider move, its #at part made in-process (no HTTP)",
      ms: sliderPart.toFixed(1),
      "× loom show": (sliderPart / show).toFixed(2),
    },
    {
      what: "live page per append, before: #run read, folded and rendered afresh",
      ms: fresh.toFixed(1),
      "× loom show": (fresh / show).toFixed(2),
    },
    {
      what: "live page per append, now: #run rendered from the kept run",
      ms: kept.toFixed(1),
      "× loom show": (kept / show).toFixed(2),
    },
  ]);
  console.log(
    `RESULT ${JSON.stringify({ bench: "viewer", turns: TURNS, entries: big.length, showMs: show, runPageMs: run, travelColdMs: travelCold, sliderMs: slider, sliderPartMs: sliderPart, liveFreshMs: fresh, liveKeptMs: kept })}`,
  );
} finally {
  await viewer.stop();
  await readonly.close();
  rmSync(dir, { recursive: true, force: true });
}

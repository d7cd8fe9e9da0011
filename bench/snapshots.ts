/**
 * Run snapshots (issue 33): what a resume reads of a long run on SQLite, with and without a
 * snapshot, at 1,000, 10,000 and 100,000 turns (one `lookup` call a turn, entries written straight
 * through the store as the loop writes them: bench/longRun.ts). The snapshot is taken `TAIL`
 * entries before the end, as a loop writing one every `TAIL` entries leaves it at worst.
 *
 * Measured per size, median of a few repeats on a fresh open of the file:
 * - "state": `readRunState`, the read a resume (and `foldRun`, `loom`) starts from, and the heap
 *   the state holds once read (after a GC);
 * - "resume" (1,000 and 10,000 turns; 100,000 with `--resume-all`): `loop.run` of the interrupted
 *   run to its end: the state read, then the chart walking every recorded turn (each served from
 *   the journal), one model call and the run's end.
 *
 *   node --expose-gc --import tsx bench/snapshots.ts [--turns 1000,10000,100000] [--resume-all]
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openSqliteJournal } from "../src/events/journal.ts";
import { readRunState } from "../src/runtime/base/snapshots.ts";
import { longRunLoop, withoutSnapshots, writeSnapshottedRun } from "./longRun.ts";
import { printTable } from "./support.ts";

const { values } = parseArgs({
  options: { turns: { type: "string" }, "resume-all": { type: "boolean" }, repeats: { type: "string" } },
});
const SIZES = (values.turns ?? "1000,10000,100000").split(",").map(Number);
const REPEATS = Number(values.repeats ?? 3);
const TAIL = 400;
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) console.log("(run with node --expose-gc for the heap figures)");

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const heap = () => {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
};

interface Row {
  turns: number;
  entries: number;
  snapshotBytes: number;
  stateMs: { with: number; without: number };
  stateHeapMb: { with: number; without: number };
  resumeMs: { with: number | undefined; without: number | undefined };
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-snapshots-"));
const rows: Row[] = [];
/** The state read last: held while the heap is measured, dropped before the next read. */
let kept: Awaited<ReturnType<typeof readRunState>> | undefined;
try {
  for (const turns of SIZES) {
    const file = join(dir, `${turns}.db`);
    const snapshot = (await writeSnapshottedRun(file, turns, { tail: TAIL })).snapshot;
    const row: Row = {
      turns,
      entries: turns * 4 + 2,
      snapshotBytes: snapshot.body.length,
      stateMs: { with: 0, without: 0 },
      stateHeapMb: { with: 0, without: 0 },
      resumeMs: { with: undefined, without: undefined },
    };
    for (const mode of ["with", "without"] as const) {
      const times: number[] = [];
      const heaps: number[] = [];
      for (let i = 0; i < REPEATS; i++) {
        const journal = openSqliteJournal(file, { readonly: true });
        const read = mode === "with" ? journal : withoutSnapshots(journal);
        kept = undefined; // the last repeat's state: gone before this one is measured
        const before = heap();
        const t = performance.now();
        kept = await readRunState(read, "long");
        times.push(performance.now() - t);
        heaps.push((heap() - before) / 2 ** 20);
        if (mode === "with" && kept.tail !== TAIL) throw new Error(`expected a tail of ${TAIL}, read ${kept.tail}`);
        if (kept.state.turns !== turns) throw new Error("the state read is not the run's");
        await journal.close();
      }
      row.stateMs[mode] = median(times);
      row.stateHeapMb[mode] = median(heaps);
    }
    if (turns <= 10_000 || values["resume-all"]) {
      for (const mode of ["with", "without"] as const) {
        // Each resume ends the run: resumed on a copy of the file, once.
        const copy = join(dir, `${turns}-${mode}.db`);
        await writeSnapshottedRun(copy, turns, { tail: TAIL });
        const journal = openSqliteJournal(copy, { synchronous: "normal" });
        const t = performance.now();
        const out = await longRunLoop(turns).run({
          runId: "long",
          journal: mode === "with" ? journal : withoutSnapshots(journal),
        });
        row.resumeMs[mode] = performance.now() - t;
        if (out.content !== "done") throw new Error("the resume did not end the run");
        await journal.close();
        rmSync(copy, { force: true });
      }
    }
    rows.push(row);
    console.log(`${turns} turns: ${(statSync(file).size / 2 ** 20).toFixed(1)} MB file`);
    rmSync(file, { force: true });
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const base = rows[0] as Row;
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? "" : (a / b).toFixed(1);
printTable(
  `What a resume reads of an interrupted run on SQLite: snapshot ${TAIL} entries before the end vs every entry (median of ${REPEATS})`,
  rows.map((r) => ({
    turns: r.turns,
    entries: r.entries,
    "snapshot KB": Math.round(r.snapshotBytes / 1024),
    "state ms, snapshot": r.stateMs.with,
    "state ms, full": r.stateMs.without,
    [`state × ${base.turns}, snapshot`]: ratio(r.stateMs.with, base.stateMs.with),
    "state heap MB": r.stateHeapMb.with,
    "full heap MB": r.stateHeapMb.without,
    "resume ms, snapshot": r.resumeMs.with ?? "",
    "resume ms, full": r.resumeMs.without ?? "",
  })),
);
const last = rows.at(-1) as Row;
console.log(
  `RESULT ${JSON.stringify({
    bench: "snapshots",
    turns: rows.map((r) => r.turns),
    stateMsSnapshot: rows.map((r) => Math.round(r.stateMs.with * 10) / 10),
    stateMsFull: rows.map((r) => Math.round(r.stateMs.without * 10) / 10),
    stateHeapMbSnapshot: rows.map((r) => Math.round(r.stateHeapMb.with * 10) / 10),
    resumeMsSnapshot: rows.map((r) => (r.resumeMs.with === undefined ? null : Math.round(r.resumeMs.with))),
    resumeMsFull: rows.map((r) => (r.resumeMs.without === undefined ? null : Math.round(r.resumeMs.without))),
    stateRatioLongestVsFirst: Math.round((last.stateMs.with / base.stateMs.with) * 10) / 10,
    targetRatio: 2,
  })}`,
);

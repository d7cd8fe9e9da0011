/**
 * Snapshots with no option set (issue 54): a loop with default options (compact snapshots every
 * 1,000 entries) against the same loop with `snapshots: false`, on SQLite (synchronous=normal),
 * one `lookup` call a turn (bench/longRun.ts's loop, run for real: the snapshots are the ones the
 * loop wrote as it went).
 *
 * - Resume: a run of 1,000 and 20,000 turns, recorded by the default loop and interrupted where one
 *   more model call was needed, resumed by the default loop: from `loop.run` to its first new step
 *   (the `frame.started` of the next model call), each resume in a fresh process on a copy of the
 *   file after a warm-up resume of a 50-turn run, median of `--repeats`; beside it the same file
 *   with its snapshots hidden (what a resume read before, every entry folded, every turn walked).
 * - Per turn: the loop's wall and CPU time a turn over a `--turns-cost`-turn run (the snapshots
 *   written beside it included), default vs `snapshots: false`, after a warm-up run of each,
 *   alternated over `--rounds` rounds (median, and the ratio within each round). bench/loop's
 *   200-turn run appends about 800 entries: fewer than the 1,000 a default snapshot waits for.
 * - Bytes: at each size, the run's journal (type, data and meta of every entry as stored), the
 *   latest snapshot the store keeps, and every snapshot the run wrote, summed.
 *
 * Targets: resume of 20,000 turns within 1.5x of 1,000 turns; per turn within 5% of no snapshots;
 * the snapshot kept within 0.25x of the journal's bytes at 20,000 turns.
 *
 *   node --expose-gc --import tsx bench/defaultSnapshots.ts [--turns 1000,20000] [--repeats 3] [--rounds 3] [--turns-cost 4000]
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openSqliteJournal } from "../src/events/journal.ts";
import type { Journal } from "../src/events/spi.ts";
import type { EventStore, StoredSnapshot } from "../src/events/store.ts";
import { entryBytes } from "../src/projections/runSnapshot.ts";
import type { AgentLoopConfig } from "../src/runtime/base/config.ts";
import { longRunLoop, withoutSnapshots } from "./longRun.ts";
import { printResult, printTable } from "./support.ts";

const { values } = parseArgs({
  options: {
    turns: { type: "string" },
    repeats: { type: "string" },
    rounds: { type: "string" },
    "turns-cost": { type: "string" },
    one: { type: "string" },
    file: { type: "string" },
    mode: { type: "string" },
  },
});
const gc = (globalThis as { gc?: () => void }).gc;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const r2 = (x: number) => Math.round(x * 100) / 100;

/** What recording a run wrote: its time, and the bytes of its journal and snapshots. */
interface Recorded {
  ms: number;
  /** The process's CPU time (every thread), less sensitive than wall time to a shared machine's load. */
  cpuMs: number;
  journalBytes: number;
  snapshotBytes: number;
  snapshotsWritten: number;
  snapshotBytesWritten: number;
}

/** Runs the long-run loop for `turns` turns into `file`, interrupted where one more model call was needed. */
async function record(file: string, turns: number, extra: Partial<AgentLoopConfig>): Promise<Recorded> {
  const journal = openSqliteJournal(file, { synchronous: "normal" });
  let snapshotsWritten = 0;
  let snapshotBytesWritten = 0;
  const store: EventStore = {
    ...journal.store,
    writeSnapshot: async (runId: string, snapshot: StoredSnapshot) => {
      snapshotsWritten++;
      snapshotBytesWritten += Buffer.byteLength(snapshot.body);
      return journal.store.writeSnapshot?.(runId, snapshot);
    },
  };
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  try {
    await longRunLoop(turns, { maxIterations: turns, ...extra }).run({
      runId: "long",
      journal: { ...journal, store },
      input: "go",
    });
    throw new Error("the run was not interrupted");
  } catch (e) {
    if ((e as { code?: string }).code !== "agentInterrupted") throw e;
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  let journalBytes = 0;
  for (const e of await journal.store.read("long")) journalBytes += entryBytes(e);
  const latest = await journal.store.latestSnapshot?.("long");
  await journal.close();
  return {
    ms,
    cpuMs,
    journalBytes,
    snapshotBytes: latest === undefined ? 0 : Buffer.byteLength(latest.body),
    snapshotsWritten,
    snapshotBytesWritten,
  };
}

/** In a child: resumes the run in `file` once, and prints the time to its first new step as JSON. */
async function measureOne(file: string, turns: number, mode: "default" | "hidden"): Promise<void> {
  const view = (j: Journal) => (mode === "default" ? j : withoutSnapshots(j));
  // A warm-up run and resume of 50 turns first: modules loaded and code compiled at every size alike.
  const warm = `${file}.warm.db`;
  await record(warm, 50, {});
  const warmJournal = openSqliteJournal(warm, { synchronous: "normal" });
  await longRunLoop(50).run({ runId: "long", journal: view(warmJournal) });
  await warmJournal.close();
  rmSync(warm, { force: true });
  gc?.();
  const opened = openSqliteJournal(file, { synchronous: "normal" });
  const base = view(opened);
  let first: number | undefined;
  const store: EventStore = {
    ...base.store,
    append: (runId, entries, options) => {
      first ??= performance.now();
      return base.store.append(runId, entries, options);
    },
  };
  const t0 = performance.now();
  const out = await longRunLoop(turns).run({ runId: "long", journal: { ...base, store } });
  await opened.close();
  if (out.content !== "done" || out.toolCallLog.length !== turns) throw new Error("the resume did not end the run");
  if (first === undefined) throw new Error("the resume appended nothing");
  console.log(JSON.stringify({ firstStepMs: first - t0 }));
}

function resumeOnce(dir: string, file: string, turns: number, mode: "default" | "hidden", i: number): number {
  const copy = join(dir, `${turns}-${mode}-${i}.db`);
  copyFileSync(file, copy);
  const args = ["--expose-gc", "--import", "tsx", "bench/defaultSnapshots.ts", "--one", String(turns)];
  const out = execFileSync(process.execPath, [...args, "--file", copy, "--mode", mode], {
    encoding: "utf8",
    maxBuffer: 2 ** 24,
  });
  rmSync(copy, { force: true });
  rmSync(`${copy}-wal`, { force: true });
  rmSync(`${copy}-shm`, { force: true });
  return (JSON.parse(out.trim().split("\n").at(-1) as string) as { firstStepMs: number }).firstStepMs;
}

async function main(): Promise<void> {
  const sizes = (values.turns ?? "1000,20000").split(",").map(Number);
  const repeats = Number(values.repeats ?? 3);
  const rounds = Number(values.rounds ?? 3);
  const costTurns = Number(values["turns-cost"] ?? 4000);
  const dir = mkdtempSync(join(tmpdir(), "loom-bench-default-snapshots-"));
  try {
    // Per turn: default vs none, alternated, a fresh file each run, after a warm-up run of each.
    for (const mode of ["default", "none"] as const) {
      const file = join(dir, `warm-${mode}.db`);
      await record(file, 300, mode === "none" ? { snapshots: false } : {});
      rmSync(file, { force: true });
    }
    const perTurn = { default: [] as number[], none: [] as number[], ratio: [] as number[], cpuRatio: [] as number[] };
    const cpuPerTurn = { default: [] as number[], none: [] as number[] };
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? (["default", "none"] as const) : (["none", "default"] as const);
      const runs: Partial<Record<"default" | "none", Recorded>> = {};
      for (const mode of order) {
        const file = join(dir, `cost-${round}-${mode}.db`);
        runs[mode] = await record(file, costTurns, mode === "none" ? { snapshots: false } : {});
        rmSync(file, { force: true });
      }
      const d = runs.default as Recorded;
      const n = runs.none as Recorded;
      perTurn.default.push((d.ms / costTurns) * 1000);
      perTurn.none.push((n.ms / costTurns) * 1000);
      perTurn.ratio.push(d.ms / n.ms);
      cpuPerTurn.default.push((d.cpuMs / costTurns) * 1000);
      cpuPerTurn.none.push((n.cpuMs / costTurns) * 1000);
      perTurn.cpuRatio.push(d.cpuMs / n.cpuMs);
    }
    console.log("per-turn cost measured");

    const rows: { turns: number; recorded: Recorded; firstStepMs: number; hiddenMs: number }[] = [];
    for (const turns of sizes) {
      const file = join(dir, `${turns}.db`);
      const recorded = await record(file, turns, {});
      const firsts: number[] = [];
      const hidden: number[] = [];
      for (let i = 0; i < repeats; i++) {
        firsts.push(resumeOnce(dir, file, turns, "default", i));
        hidden.push(resumeOnce(dir, file, turns, "hidden", i));
      }
      rows.push({ turns, recorded, firstStepMs: median(firsts), hiddenMs: median(hidden) });
      console.log(`${turns} turns measured`);
      rmSync(file, { force: true });
    }
    const first = rows[0] as (typeof rows)[number];
    const last = rows.at(-1) as (typeof rows)[number];
    printTable(
      `Resume to the first new step, default loop on SQLite (fresh process each, median of ${repeats}), and bytes`,
      rows.map((r) => ({
        turns: r.turns,
        "first step ms": r2(r.firstStepMs),
        [`× ${first.turns}`]: r2(r.firstStepMs / first.firstStepMs),
        "first step ms, snapshots hidden": r2(r.hiddenMs),
        "journal KB": Math.round(r.recorded.journalBytes / 1024),
        "snapshot KB": r2(r.recorded.snapshotBytes / 1024),
        "snapshot / journal": r2(r.recorded.snapshotBytes / r.recorded.journalBytes),
        "snapshots written": r.recorded.snapshotsWritten,
        "written KB, all": Math.round(r.recorded.snapshotBytesWritten / 1024),
        "written / journal": r2(r.recorded.snapshotBytesWritten / r.recorded.journalBytes),
        "record ms": Math.round(r.recorded.ms),
      })),
    );
    printTable(
      `Loop per turn, ${costTurns}-turn run on SQLite (synchronous=normal), default vs snapshots: false, ${rounds} alternated rounds`,
      perTurn.ratio.map((ratio, i) => ({
        round: i + 1,
        "µs a turn, default": r2(perTurn.default[i] as number),
        "µs a turn, none": r2(perTurn.none[i] as number),
        "default / none": r2(ratio),
        "CPU µs a turn, default": r2(cpuPerTurn.default[i] as number),
        "CPU µs a turn, none": r2(cpuPerTurn.none[i] as number),
        "CPU default / none": r2(perTurn.cpuRatio[i] as number),
      })),
    );
    printResult("defaultSnapshots", {
      turns: rows.map((r) => r.turns),
      firstStepMs: rows.map((r) => r2(r.firstStepMs)),
      firstStepMsSnapshotsHidden: rows.map((r) => r2(r.hiddenMs)),
      resumeRatioLongestVsFirst: r2(last.firstStepMs / first.firstStepMs),
      resumeTargetRatio: 1.5,
      perTurnUsDefault: r2(median(perTurn.default)),
      perTurnUsNone: r2(median(perTurn.none)),
      perTurnRatio: r2(median(perTurn.ratio)),
      perTurnCpuUsDefault: r2(median(cpuPerTurn.default)),
      perTurnCpuUsNone: r2(median(cpuPerTurn.none)),
      perTurnCpuRatio: r2(median(perTurn.cpuRatio)),
      perTurnTargetRatio: 1.05,
      journalBytes: rows.map((r) => r.recorded.journalBytes),
      snapshotBytes: rows.map((r) => r.recorded.snapshotBytes),
      snapshotBytesWritten: rows.map((r) => r.recorded.snapshotBytesWritten),
      snapshotVsJournal: r2(last.recorded.snapshotBytes / last.recorded.journalBytes),
      snapshotsWrittenVsJournal: r2(last.recorded.snapshotBytesWritten / last.recorded.journalBytes),
      snapshotTargetRatio: 0.25,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (values.one !== undefined) {
  await measureOne(values.file as string, Number(values.one), values.mode === "hidden" ? "hidden" : "default");
} else await main();

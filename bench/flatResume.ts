/**
 * Flat resume (issue 33): the resume of an interrupted long run on SQLite at 1,000, 10,000 and
 * 100,000 turns (one `lookup` call a turn, entries written straight through the store as the loop
 * writes them: bench/longRun.ts), from a compact snapshot `TAIL` entries before the end
 * (`snapshots: { compact: true }`) and, for comparison, from no snapshot (every entry read, every
 * turn walked).
 *
 * What "resume" measures: from `loop.run` to the first new step, i.e. the moment the resumed run
 * appends its first entry (the `frame.started` of its next model call), and the memory the process
 * holds then (heap after a GC, and RSS, both above what the process held before the journal was
 * opened). Each resume runs in a fresh process (RSS is the process's), on a copy of the file,
 * after a warm-up resume of a 50-turn run (modules loaded, code compiled); median of `--repeats`. After that first step the model is sent the whole conversation, which
 * a compact resume reads from the journal only then (see docs/long-runs.md): that is the model's
 * prompt, not the resume, and grows with the run whatever is stored. "to end" is `loop.run` to
 * the run's completion (the conversation read, one model call, the whole tool-call log folded).
 *
 *   node --expose-gc --import tsx bench/flatResume.ts [--turns 1000,10000,100000] [--repeats 3] [--full-max 10000]
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openSqliteJournal } from "../src/events/journal.ts";
import type { EventStore } from "../src/events/store.ts";
import { longRunLoop, withoutSnapshots, writeSnapshottedRun } from "./longRun.ts";
import { printTable } from "./support.ts";

const { values } = parseArgs({
  options: {
    turns: { type: "string" },
    repeats: { type: "string" },
    "full-max": { type: "string" },
    one: { type: "string" },
    file: { type: "string" },
    mode: { type: "string" },
  },
});
const TAIL = 400;
const gc = (globalThis as { gc?: () => void }).gc;

/** One measured resume (a child process). */
interface Measure {
  firstStepMs: number;
  heapMb: number;
  rssMb: number;
  endMs: number;
}

/** In a child: resumes the run in `file` once, and prints what it measured as JSON. */
async function measureOne(file: string, turns: number, mode: "compact" | "full"): Promise<void> {
  // A warm-up resume of a 50-turn run first (its own file, same mode): the modules a resume loads
  // and the code it compiles are the process's, not the measured resume's, at every size alike.
  const warm = `${file}.warm.db`;
  await writeSnapshottedRun(warm, 50, { tail: 40, compact: true });
  const warmJournal = openSqliteJournal(warm, { synchronous: "normal" });
  const warmLoop = longRunLoop(50, mode === "compact" ? { snapshots: { every: 1_000_000, compact: true } } : {});
  await warmLoop.run({ runId: "long", journal: mode === "compact" ? warmJournal : withoutSnapshots(warmJournal) });
  await warmJournal.close();
  rmSync(warm, { force: true });
  gc?.();
  const heap0 = process.memoryUsage().heapUsed;
  const rss0 = process.memoryUsage().rss;
  const opened = openSqliteJournal(file, { synchronous: "normal" });
  const base = mode === "compact" ? opened : withoutSnapshots(opened);
  let first: { at: number; heap: number; rss: number } | undefined;
  const store: EventStore = {
    ...base.store,
    append: (runId, entries, options) => {
      if (first === undefined) {
        const at = performance.now();
        gc?.();
        const m = process.memoryUsage();
        first = { at, heap: m.heapUsed, rss: m.rss };
      }
      return base.store.append(runId, entries, options);
    },
  };
  const loop = longRunLoop(turns, mode === "compact" ? { snapshots: { every: 1_000_000, compact: true } } : {});
  const t0 = performance.now();
  const out = await loop.run({ runId: "long", journal: { ...base, store } });
  const end = performance.now();
  if (out.content !== "done" || out.toolCallLog.length !== turns) throw new Error("the resume did not end the run");
  await opened.close();
  if (first === undefined) throw new Error("the resume appended nothing");
  const measure: Measure = {
    firstStepMs: first.at - t0,
    heapMb: (first.heap - heap0) / 2 ** 20,
    rssMb: (first.rss - rss0) / 2 ** 20,
    endMs: end - t0,
  };
  console.log(JSON.stringify(measure));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

async function main(): Promise<void> {
  const sizes = (values.turns ?? "1000,10000,100000").split(",").map(Number);
  const repeats = Number(values.repeats ?? 3);
  const fullMax = Number(values["full-max"] ?? 10_000);
  const dir = mkdtempSync(join(tmpdir(), "loom-bench-flat-"));
  const rows: { turns: number; compact: Measure; full: Measure | undefined }[] = [];
  try {
    for (const turns of sizes) {
      const file = join(dir, `${turns}.db`);
      await writeSnapshottedRun(file, turns, { tail: TAIL, compact: true });
      const run = (mode: "compact" | "full"): Measure => {
        const results: Measure[] = [];
        for (let i = 0; i < repeats; i++) {
          const copy = join(dir, `${turns}-${mode}-${i}.db`);
          copyFileSync(file, copy);
          const args = ["--expose-gc", "--import", "tsx", "bench/flatResume.ts", "--one", String(turns)];
          const out = execFileSync(process.execPath, [...args, "--file", copy, "--mode", mode], {
            encoding: "utf8",
            maxBuffer: 2 ** 24,
          });
          results.push(JSON.parse(out.trim().split("\n").at(-1) as string) as Measure);
          rmSync(copy, { force: true });
        }
        const pick = (k: keyof Measure) => median(results.map((r) => r[k]));
        return {
          firstStepMs: pick("firstStepMs"),
          heapMb: pick("heapMb"),
          rssMb: pick("rssMb"),
          endMs: pick("endMs"),
        };
      };
      rows.push({ turns, compact: run("compact"), full: turns <= fullMax ? run("full") : undefined });
      console.log(`${turns} turns measured`);
      rmSync(file, { force: true });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const first = rows[0] as (typeof rows)[number];
  const last = rows.at(-1) as (typeof rows)[number];
  const r1 = (x: number) => Math.round(x * 10) / 10;
  printTable(
    `Resume of an interrupted run on SQLite to its first new step: compact snapshot ${TAIL} entries before the end vs no snapshot (fresh process each, median of ${repeats})`,
    rows.map((r) => ({
      turns: r.turns,
      entries: r.turns * 4 + 2,
      "first step ms, compact": r1(r.compact.firstStepMs),
      [`× ${first.turns}`]: r1(r.compact.firstStepMs / first.compact.firstStepMs),
      "heap MB, compact": r1(r.compact.heapMb),
      "RSS MB, compact": r1(r.compact.rssMb),
      "first step ms, none": r.full ? r1(r.full.firstStepMs) : "",
      "heap MB, none": r.full ? r1(r.full.heapMb) : "",
      "RSS MB, none": r.full ? r1(r.full.rssMb) : "",
      "to end ms, compact": Math.round(r.compact.endMs),
      "to end ms, none": r.full ? Math.round(r.full.endMs) : "",
    })),
  );
  console.log(
    `RESULT ${JSON.stringify({
      bench: "flatResume",
      turns: rows.map((r) => r.turns),
      firstStepMsCompact: rows.map((r) => r1(r.compact.firstStepMs)),
      heapMbCompact: rows.map((r) => r1(r.compact.heapMb)),
      rssMbCompact: rows.map((r) => r1(r.compact.rssMb)),
      firstStepMsNone: rows.map((r) => (r.full ? r1(r.full.firstStepMs) : null)),
      endMsCompact: rows.map((r) => Math.round(r.compact.endMs)),
      ratioLongestVsFirst: r1(last.compact.firstStepMs / first.compact.firstStepMs),
      targetRatio: 2,
    })}`,
  );
}

if (values.one !== undefined) {
  await measureOne(values.file as string, Number(values.one), values.mode === "full" ? "full" : "compact");
} else await main();

/**
 * The read side from snapshots (issue 33): what `loom runs` (a run's row: `readRunRows`) and
 * `loom show <step>` of a late step (`showStep`) cost (and the row's own read, `readRunRow`, without
 * the store's `listRuns`) on a long run on SQLite with a compact
 * snapshot `TAIL` entries before its end, at 1,000 and 100,000 turns (one `lookup` call a turn,
 * entries written straight through the store as the loop writes them: bench/longRun.ts). The
 * sizes alternate within each repeat, each read on a fresh open of its file; the row is also read
 * once without the snapshot (every entry) for comparison.
 *
 *   node --import tsx bench/snapshotReads.ts [--turns 1000,100000] [--repeats 5]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openSqliteJournal } from "../src/events/journal.ts";
import type { Journal } from "../src/events/spi.ts";
import { readRunRow, readRunRows } from "../src/read/runRow.ts";
import { showStep } from "../src/read/step.ts";
import { LONG_LOOP, withoutSnapshots, writeSnapshottedRun } from "./longRun.ts";
import { printTable } from "./support.ts";

const { values } = parseArgs({ options: { turns: { type: "string" }, repeats: { type: "string" } } });
const SIZES = (values.turns ?? "1000,100000").split(",").map(Number);
const REPEATS = Number(values.repeats ?? 5);
const TAIL = 400;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

async function timed<T>(f: (journal: Journal) => Promise<T>, file: string, full = false): Promise<number> {
  const journal = openSqliteJournal(file, { readonly: true });
  try {
    const t0 = performance.now();
    await f(full ? withoutSnapshots(journal) : journal);
    return performance.now() - t0;
  } finally {
    await journal.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-snapshot-reads-"));
try {
  const files = new Map<number, { file: string; entries: number }>();
  for (const turns of SIZES) {
    const file = join(dir, `run-${turns}.db`);
    files.set(turns, {
      file,
      entries: (await writeSnapshottedRun(file, turns, { tail: TAIL, compact: true })).entries,
    });
  }
  const row = new Map<number, number[]>(SIZES.map((t) => [t, []]));
  const step = new Map<number, number[]>(SIZES.map((t) => [t, []]));
  const one = new Map<number, number[]>(SIZES.map((t) => [t, []]));
  for (let r = 0; r < REPEATS; r++) {
    // Alternating sizes, so the machine's load falls on both alike.
    for (const turns of r % 2 === 0 ? SIZES : [...SIZES].reverse()) {
      const { file } = files.get(turns) as { file: string };
      row.get(turns)?.push(await timed((j) => readRunRows(j), file));
      one.get(turns)?.push(await timed((j) => readRunRow(j, "long"), file));
      const late = `${LONG_LOOP}#turn:${turns - 2}:tool:0`;
      step.get(turns)?.push(await timed((j) => showStep(j, late, "long"), file));
    }
  }
  const base = SIZES[0] as number;
  const rows: Record<string, string>[] = [];
  const result: Record<string, number> = {};
  for (const turns of SIZES) {
    const { file, entries } = files.get(turns) as { file: string; entries: number };
    const full = await timed((j) => readRunRows(j), file, true);
    const rowMs = median(row.get(turns) as number[]);
    const stepMs = median(step.get(turns) as number[]);
    const oneMs = median(one.get(turns) as number[]);
    const oneRatio = oneMs / median(one.get(base) as number[]);
    const rowRatio = rowMs / median(row.get(base) as number[]);
    const stepRatio = stepMs / median(step.get(base) as number[]);
    const times = `× ${base.toLocaleString("en")}`;
    rows.push({
      turns: turns.toLocaleString("en"),
      entries: entries.toLocaleString("en"),
      "loom runs row ms": rowMs.toFixed(1),
      [`row ${times}`]: rowRatio.toFixed(2),
      "its read ms": oneMs.toFixed(1),
      [`read ${times}`]: oneRatio.toFixed(2),
      "late step ms": stepMs.toFixed(1),
      [`step ${times}`]: stepRatio.toFixed(2),
      "row ms, no snapshot": full.toFixed(0),
    });
    result[`row_ms_${turns}`] = Number(rowMs.toFixed(2));
    result[`step_ms_${turns}`] = Number(stepMs.toFixed(2));
    result[`row_read_ms_${turns}`] = Number(oneMs.toFixed(2));
    result[`row_full_ms_${turns}`] = Number(full.toFixed(0));
    if (turns !== base) {
      result[`row_ratio_${turns}_vs_${base}`] = Number(rowRatio.toFixed(2));
      result[`step_ratio_${turns}_vs_${base}`] = Number(stepRatio.toFixed(2));
      result[`row_read_ratio_${turns}_vs_${base}`] = Number(oneRatio.toFixed(2));
    }
  }
  printTable(`median of ${REPEATS}, SQLite, compact snapshot ${TAIL} entries before the end`, rows);
  console.log(`RESULT ${JSON.stringify({ bench: "snapshotReads", ...result })}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

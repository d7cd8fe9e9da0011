/** The files of bench/ that benchmarks import, not benchmarks themselves (bench/run.ts runs the rest). */
export const NOT_BENCHMARKS: ReadonlySet<string> = new Set(["support.ts", "run.ts", "longRun.ts"]);

/** Small helpers shared by the benchmarks: a seeded generator, timing, a table printer. */

/** mulberry32: a tiny seeded PRNG, so every benchmark run measures the same data. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ["alpha", "beta", "gamma", "delta", "loom", "frame", "turn", "tool", "journal", "digest", "lean", "full"];

/**
 * A tool-output-like object (search hits with text) whose JSON is exactly `targetBytes` long (for
 * targets above ~100 bytes): hits are added while they fit, then a `note` pads to the size, so
 * a workload's total output bytes are the sum of its targets and no output overshoots its range.
 */
export function toolOutput(next: () => number, targetBytes: number): Record<string, unknown> {
  const hits: Record<string, unknown>[] = [];
  const out: Record<string, unknown> = {
    query: WORDS[Math.floor(next() * WORDS.length)],
    total: 0,
    hits,
    tookMs: Math.round(next() * 100),
    note: "",
  };
  let size = JSON.stringify(out).length;
  for (;;) {
    const words = Array.from({ length: 6 + Math.floor(next() * 10) }, () => WORDS[Math.floor(next() * WORDS.length)]);
    const hit = {
      id: `doc-${hits.length}`,
      score: Math.round(next() * 1e6) / 1e6,
      title: words.slice(0, 3).join(" "),
      text: words.join(" "),
      tags: words.slice(0, 2),
    };
    const grow = JSON.stringify(hit).length + (hits.length > 0 ? 1 : 0);
    if (size + grow > targetBytes) break;
    hits.push(hit);
    size += grow;
  }
  out.total = hits.length;
  const left = targetBytes - JSON.stringify(out).length;
  if (left > 0) out.note = "n".repeat(left);
  return out;
}

/** Runs `fn` repeatedly for about `ms` milliseconds (after a warm-up) and returns ops per second. */
export function opsPerSecond(fn: () => void, ms = 400): number {
  const warm = performance.now();
  while (performance.now() - warm < ms / 4) fn();
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    fn();
    n++;
    now = performance.now();
  }
  return (n * 1000) / (now - start);
}

/** Every table this process printed, in order: the figures {@link printResult} ends the bench with. */
const printed: { readonly title: string; readonly rows: readonly Record<string, string | number>[] }[] = [];

/** Prints rows as an aligned Markdown table (and keeps them for {@link printResult}). */
export function printTable(title: string, rows: Record<string, string | number>[]): void {
  const first = rows[0];
  if (!first) return;
  printed.push({ title, rows });
  const cols = Object.keys(first);
  const cell = (v: string | number | undefined) => (typeof v === "number" ? fmt(v) : (v ?? ""));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => `| ${vals.map((v, i) => v.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  console.log(`\n${title}\n`);
  console.log(line(cols));
  console.log(line(widths.map((w) => "-".repeat(w))));
  for (const r of rows) console.log(line(cols.map((c) => cell(r[c]))));
}

/**
 * Prints a bench's last line, `RESULT {json}`: its name, the figures given (its ratios and targets,
 * each target beside what it measured) and every table it printed, numbers as measured rather than
 * as formatted, so two runs compare without parsing a table.
 *
 * @example
 * printResult("digest", { target: "ours/stringify ≥ 0.5", worst: 0.71, met: true });
 */
export function printResult(bench: string, figures: Record<string, unknown> = {}): void {
  console.log(`RESULT ${JSON.stringify({ bench, ...figures, tables: printed })}`);
}

function fmt(n: number): string {
  if (Number.isInteger(n)) return n.toLocaleString("en-US");
  return n >= 100 ? n.toFixed(0) : n >= 1 ? n.toFixed(2) : n.toFixed(3);
}

/**
 * A bench's worker process: says `ready` once its journal answers, and on SIGTERM stops the
 * worker, closes the journal and exits (the parent counts on both).
 */
export async function serveUntilTerm(
  journal: { store: { listRuns(): Promise<unknown> }; close(): Promise<void> },
  worker: { stop(): Promise<void> },
): Promise<void> {
  await journal.store.listRuns();
  console.log("ready");
  process.on("SIGTERM", () => {
    void worker
      .stop()
      .then(() => journal.close())
      .then(() => process.exit(0));
  });
}

/**
 * Resume of a long interrupted run: a 2,000-turn run (one tool call a turn, 1.5–4 kB outputs)
 * stopped by its iteration limit, resumed on SQLite. The resume reads and folds the journal,
 * walks the chart through every recorded turn with each frame served from the journal, and stops
 * at the limit again. Target (issue 15): within 1.5× of the resume before the chart walked it.
 *
 * Both builds are measured in one run, interleaved, when a second checkout is given:
 *
 *   node --import tsx bench/resume.ts [--baseline /path/to/older/checkout] [--turns 2000]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { printResult, printTable, rng, toolOutput } from "./support.ts";

const { values } = parseArgs({ options: { baseline: { type: "string" }, turns: { type: "string" } } });
const TURNS = Number(values.turns ?? 2000);
const REPEATS = 9;

interface Build {
  readonly name: string;
  readonly lib: {
    agentLoop$: (config: unknown) => { run(request: unknown): Promise<unknown> };
    openSqliteJournal: (file: string) => { close(): Promise<void> };
    scriptedModel: (next: (request: { turn: number }) => unknown) => unknown;
  };
}

async function load(name: string, root: string): Promise<Build> {
  const lib = await import(pathToFileURL(join(root, "src/index.ts")).href);
  return { name, lib };
}

const next = rng(11);
const outputs = Array.from({ length: TURNS }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));

function loopOf(build: Build) {
  const model = build.lib.scriptedModel(({ turn }) => ({
    toolCalls: [{ id: `c${turn}`, name: "lookup", input: { n: turn } }],
  }));
  const lookup = { description: "looks things up", execute: (input: { n: number }) => outputs[input.n] };
  return build.lib.agentLoop$({ id: "resume", model, tools: { lookup }, maxIterations: TURNS });
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-resume-"));
try {
  const builds = [await load("this checkout", resolve(import.meta.dirname, ".."))];
  if (values.baseline) builds.push(await load(`baseline (${values.baseline})`, resolve(values.baseline)));
  const files = new Map<string, string>();
  for (const build of builds) {
    // Recorded by the build itself: each build resumes a journal it wrote.
    const file = join(dir, `${builds.indexOf(build)}.db`);
    const journal = build.lib.openSqliteJournal(file);
    await loopOf(build)
      .run({ runId: "long", input: "go", journal })
      .catch((e: { run?: { reason?: string } }) => {
        if (e?.run?.reason !== "max-iterations") throw e;
      });
    await journal.close();
    files.set(build.name, file);
  }
  const times = new Map<string, number[]>(builds.map((b) => [b.name, []]));
  for (let i = 0; i < REPEATS; i++) {
    // Alternating the order: neither build always runs right after the other's garbage.
    for (const build of i % 2 === 0 ? builds : [...builds].reverse()) {
      const journal = build.lib.openSqliteJournal(files.get(build.name) as string);
      const loop = loopOf(build);
      const t = performance.now();
      await loop.run({ runId: "long", journal }).catch((e: { run?: { reason?: string } }) => {
        if (e?.run?.reason !== "max-iterations") throw e;
      });
      (times.get(build.name) as number[]).push(performance.now() - t);
      await journal.close();
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  const base = builds[1] ? median(times.get(builds[1].name) as number[]) : undefined;
  printTable(
    `Resume of an interrupted ${TURNS}-turn run on SQLite (median of ${REPEATS}, builds interleaved)`,
    builds.map((b) => {
      const ms = median(times.get(b.name) as number[]);
      return { build: b.name, "resume ms": ms, "× baseline": base === undefined ? "" : ms / base };
    }),
  );
  const ours = median(times.get(builds[0]?.name ?? "") as number[]);
  printResult("resume", {
    turns: TURNS,
    target: "≤ 1.5× the baseline build's resume (--baseline)",
    resumeMs: ours,
    vsBaseline: base === undefined ? null : ours / base,
    met: base === undefined ? null : ours / base <= 1.5,
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}

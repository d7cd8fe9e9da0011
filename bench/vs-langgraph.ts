/**
 * Loom against LangGraph.js on one workload, in one run: an agent loop of N turns (N = 100, 200,
 * 400), one tool call a turn, tool outputs of 1.5–4 kB (bench/support.ts toolOutput; target sizes
 * evenly spaced over the range in a seeded order, so every N has the same mean output), a
 * deterministic model, no network.
 *
 * - Loom: `agentLoop$` with `scriptedModel`, journal `openSqliteJournal(file)`, in lean mode and
 *   in full mode (`toolCallLog: "lean" | "full"`).
 * - LangGraph.js: StateGraph(MessagesAnnotation), a model node (a fake chat model: an AIMessage
 *   with one tool call from the script), a ToolNode, a conditional edge, compiled with
 *   `SqliteSaver.fromConnString(file)`, invoked with `{ configurable: { thread_id } }`
 *   (bench/vsLanggraph/langgraph.ts). The tool returns the same output, as JSON text (a
 *   ToolMessage's content is text).
 *
 * Durability: SqliteSaver's connection runs WAL with synchronous NORMAL (better-sqlite3's
 * default); Loom is run at the same level (`{ synchronous: "normal" }`). Loom's own default is
 * FULL (an fsync a commit). Extra rows, up to 200 turns and without targets: Loom lean and
 * LangGraph both at FULL, and LangGraph with its experimental MessagesDeltaValue (beta, which
 * checkpoints message deltas plus a snapshot every 100 updates instead of the whole list).
 *
 * Measured, per system and N (bench/vsLanggraph/storage.ts):
 * - storage, `rows`: the bytes of every table row as SQLite stores them (record payload of the
 *   table b-trees, read from `dbstat`, overflow pages included): no indexes, no page slack. The
 *   targets are judged on this figure. Also `file`: the size of a `VACUUM INTO` copy made after
 *   `PRAGMA wal_checkpoint(TRUNCATE)` (all pages: tables, indexes, page slack; no WAL, no free
 *   pages). The same function measures both systems' files.
 * - run: wall time of one run from the prompt to the final answer, each run on a new file. Loom:
 *   median of 5 runs; LangGraph: median of 3 at 100 turns, one run above (it is the slow part:
 *   40–75 s at 400 turns; a LangGraph run predicted, quadratically from the previous turn count,
 *   to take over 3 min is skipped and the table says so). A warm-up of every system (50 turns)
 *   comes first. Also `run CPU ms`, this process's CPU time (user + system) over the same run:
 *   on a machine shared with other work, wall time inflates the run that waits more (Loom's
 *   many small commits) and CPU time does not; the target is judged on wall time.
 * - resume: a cold resume of the completed run, best of 7, the resumes of all systems interleaved
 *   (one of each in turn) so that other processes' load falls on all alike: open the file anew
 *   and ask for the run's value. Loom: `openSqliteJournal(file)` + `loop.run({ runId, journal })`
 *   (reads and folds the journal, returns the recorded output, calls nothing) + close. LangGraph:
 *   a new SqliteSaver + a newly compiled graph + `graph.invoke(null, config)` (loads the last
 *   checkpoint, finds nothing to run, returns the final state) + close. `graph.getState` is timed
 *   too (printed beside it); neither appends anything (checked).
 * - floor: the sum of the tool outputs' canonical JSON bytes (`canonicalJson`): what a journal
 *   that stores only step results would need. Loom's `rows` is printed against it.
 *
 * Targets (issue 8): Loom's storage ≤ 1/100 of LangGraph's at 200 turns; linear in turns (bytes per
 * turn at 400 within 10% of bytes per turn at 100); run time ≤ 1/10 of LangGraph's; resume ≤ 1/2;
 * lean storage ≤ 1.15× the floor. Then Loom's bytes per turn, part by part (where they go).
 *
 *   node --import tsx bench/vs-langgraph.ts            # all of it: 2–4 min on 2 cores
 *   node --import tsx bench/vs-langgraph.ts 100 200    # only these turn counts
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { canonicalJson } from "../src/core/index.ts";
import { openSqliteJournal } from "../src/events/journal.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import type { ToolCallLogMode } from "../src/projections/types.ts";
import type { Tool } from "../src/runtime/base/config.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printResult, printTable, rng, toolOutput } from "./support.ts";
import { langGraphAgent, type MessagesState, PROMPT } from "./vsLanggraph/langgraph.ts";
import { loomByteParts } from "./vsLanggraph/loomBytes.ts";
import { measureSqlite, type Storage } from "./vsLanggraph/storage.ts";

const TURN_COUNTS = process.argv.slice(2).map(Number).filter(Number.isInteger);
const TURNS = TURN_COUNTS.length > 0 ? TURN_COUNTS : [100, 200, 400];
const SEED = 142;
const LOOM_REPEATS = 5;
/** LangGraph runs are the slow part: the median of 3 where they are short, one run above. */
const langRepeats = (turns: number) => (turns <= 100 ? 3 : 1);
const RESUME_REPEATS = 7;
const BREAKDOWN_TURNS = TURNS.includes(200) ? 200 : (TURNS[0] as number);

/** The workload of `turns` turns: one output per turn, 1.5–4 kB, fixed seed. */
function workload(turns: number) {
  const next = rng(SEED + turns);
  const targets = Array.from({ length: turns }, (_, i) => 1500 + Math.round((2500 * (i + 0.5)) / turns));
  for (let i = targets.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [targets[i], targets[j]] = [targets[j] as number, targets[i] as number];
  }
  const outputs = targets.map((t) => toolOutput(next, t));
  const floor = outputs.reduce((sum, o) => sum + Buffer.byteLength(canonicalJson(o), "utf8"), 0);
  return { turns, outputs, floor };
}
type Workload = ReturnType<typeof workload>;

function loomLoop(w: Workload, mode: ToolCallLogMode) {
  const lookup: Tool = { description: "looks things up", execute: (input) => w.outputs[(input as { n: number }).n] };
  const model = scriptedModel(({ turn }) =>
    turn < w.turns
      ? { toolCalls: [{ id: `c${turn}`, name: "lookup", input: { n: turn } }] }
      : { content: "done", toolCalls: [] },
  );
  return agentLoop$({ id: "agent", model, tools: { lookup }, maxIterations: w.turns + 1, toolCallLog: mode });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/** CPU time (user + system) of this process since `start`, in ms: unlike wall time, not inflated by other processes. */
const cpuMs = (start: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(start);
  return (u.user + u.system) / 1000;
};

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t = performance.now();
  const value = await fn();
  return [performance.now() - t, value];
}

interface Result {
  readonly storage: Storage;
  readonly runMs: number;
  /** CPU time of this process during the run (user + system), median like runMs. */
  readonly runCpuMs: number;
  readonly resumeMs: number;
  readonly stateMs?: number;
  readonly file: string;
}

/** A completed run, before its resume is timed: the resumes of all systems are interleaved. */
interface Ran {
  readonly storage: Storage;
  readonly runMs: number;
  readonly runCpuMs: number;
  readonly file: string;
  /** One cold resume, timed. */
  resume(): Promise<number>;
  /** One cold getState, timed (LangGraph). */
  state?(): Promise<number>;
}

async function runLoom(
  dir: string,
  w: Workload,
  mode: ToolCallLogMode,
  synchronous: "normal" | "full",
  repeats: number,
): Promise<Ran> {
  const loop = loomLoop(w, mode);
  const runId = `run-${mode}-${w.turns}`;
  const times: number[] = [];
  const cpus: number[] = [];
  let file = "";
  for (let r = 0; r < repeats; r++) {
    file = join(dir, `loom-${mode}-${synchronous}-${w.turns}-${r}.db`);
    const journal = openSqliteJournal(file, { synchronous });
    const cpu = process.cpuUsage();
    const [ms, out] = await timed(() => loop.run({ runId, journal, input: PROMPT }));
    cpus.push(cpuMs(cpu));
    await journal.close();
    if (out.toolCallLog.length !== w.turns || out.content !== "done") throw new Error(`${runId}: not completed`);
    times.push(ms);
  }
  const resume = async () => {
    const [ms, out] = await timed(async () => {
      const journal = openSqliteJournal(file, { synchronous });
      try {
        return await loop.run({ runId, journal });
      } finally {
        await journal.close();
      }
    });
    if (out.toolCallLog.length !== w.turns) throw new Error(`${runId}: the resume lost steps`);
    return ms;
  };
  return { storage: measureSqlite(file), runMs: median(times), runCpuMs: median(cpus), file, resume };
}

async function runLangGraph(
  dir: string,
  w: Workload,
  messages: MessagesState,
  synchronous: "normal" | "full",
): Promise<Ran> {
  const threadId = `thread-${w.turns}`;
  const options = { messages, synchronous };
  const times: number[] = [];
  const cpus: number[] = [];
  let file = "";
  for (let r = 0; r < langRepeats(w.turns); r++) {
    rmSync(file, { force: true });
    file = join(dir, `langgraph-${messages}-${synchronous}-${w.turns}-${r}.db`);
    const agent = langGraphAgent(w.outputs, file, options);
    const cpu = process.cpuUsage();
    const [ms, final] = await timed(() => agent.run(threadId));
    cpus.push(cpuMs(cpu));
    agent.close();
    if (final.messages.length !== 2 * w.turns + 2 || final.messages.at(-1)?.content !== "done") {
      throw new Error(`${threadId}: not completed (${final.messages.length} messages)`);
    }
    times.push(ms);
  }
  const fresh = async <T>(use: (agent: ReturnType<typeof langGraphAgent>) => Promise<T>) => {
    const agent = langGraphAgent(w.outputs, file, options);
    try {
      return await use(agent);
    } finally {
      agent.close();
    }
  };
  const resume = async () => {
    const [ms, state] = await timed(() => fresh((agent) => agent.resume(threadId)));
    if (state.messages.length !== 2 * w.turns + 2) throw new Error(`${threadId}: the resume lost messages`);
    return ms;
  };
  const state = async () => (await timed(() => fresh((agent) => agent.state(threadId))))[0];
  return { storage: measureSqlite(file), runMs: median(times), runCpuMs: median(cpus), file, resume, state };
}

/**
 * Times the resumes of runs that ran side by side, interleaved (one of each in turn, repeated),
 * so that the load of other processes falls on all of them alike; best of RESUME_REPEATS each.
 */
async function timeResumes(ran: readonly Ran[]): Promise<Result[]> {
  const resumes = ran.map(() => [] as number[]);
  const states = ran.map(() => [] as number[]);
  for (let r = 0; r < RESUME_REPEATS; r++) {
    for (const [i, run] of ran.entries()) {
      resumes[i]?.push(await run.resume());
      if (run.state) states[i]?.push(await run.state());
    }
  }
  return ran.map((run, i) => {
    // Resuming a completed run must write nothing.
    if (measureSqlite(run.file).rows !== run.storage.rows) throw new Error(`${run.file}: the resume wrote`);
    const s = states[i] ?? [];
    return {
      storage: run.storage,
      runMs: run.runMs,
      runCpuMs: run.runCpuMs,
      file: run.file,
      resumeMs: Math.min(...(resumes[i] ?? [])),
      ...(s.length > 0 ? { stateMs: Math.min(...s) } : {}),
    };
  });
}

/** LangGraph's rows per table (checkpoints: the full state every superstep; writes: each step's update). */
function langGraphTables(file: string): { checkpoints: number; writes: number; count: number } {
  const db = new Database(file, { readonly: true });
  try {
    const payload = (name: string) =>
      db.prepare("SELECT coalesce(sum(payload), 0) FROM dbstat WHERE name = ?").pluck().get(name) as number;
    const count = db.prepare("SELECT count(*) FROM checkpoints").pluck().get() as number;
    return { checkpoints: payload("checkpoints"), writes: payload("writes"), count };
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------

/** The systems measured, in table order. The first three are the ones the targets judge. */
const SYSTEMS = {
  loomLean: { label: "Loom lean", run: (d: string, w: Workload) => runLoom(d, w, "lean", "normal", LOOM_REPEATS) },
  loomFull: { label: "Loom full", run: (d: string, w: Workload) => runLoom(d, w, "full", "normal", LOOM_REPEATS) },
  lang: { label: "LangGraph.js", run: (d: string, w: Workload) => runLangGraph(d, w, "annotation", "normal") },
  // Extras, for what they tell (no target), up to EXTRAS_UP_TO turns to keep the bench short.
  loomLeanFsync: { label: "Loom lean, sync FULL", run: (d: string, w: Workload) => runLoom(d, w, "lean", "full", 1) },
  langFsync: {
    label: "LangGraph.js, sync FULL",
    run: (d: string, w: Workload) => runLangGraph(d, w, "annotation", "full"),
  },
  langDelta: {
    label: "LangGraph.js, MessagesDeltaValue (beta)",
    run: (d: string, w: Workload) => runLangGraph(d, w, "delta", "normal"),
  },
} as const;
type System = keyof typeof SYSTEMS;
const EXTRAS: readonly System[] = ["loomLeanFsync", "langFsync", "langDelta"];
const EXTRAS_UP_TO = 200;
/** A LangGraph run predicted (quadratic in turns, from the last one) to take longer is skipped. */
const LANGGRAPH_BUDGET_MS = 180_000;

const started = performance.now();
const dir = mkdtempSync(join(tmpdir(), "loom-vs-langgraph-"));
try {
  // Warm-up: every code path JIT-compiled before anything is timed.
  const warm = workload(50);
  await timeResumes(await Promise.all(Object.values(SYSTEMS).map((system) => system.run(dir, warm))));

  const results = new Map<string, Result>();
  const skipped: string[] = [];
  const key = (system: System, turns: number) => `${system}/${turns}`;
  const result = (system: System, turns: number) => results.get(key(system, turns));
  const langTables = new Map<number, ReturnType<typeof langGraphTables>>();
  const work = new Map<number, Workload>();
  const systems = Object.entries(SYSTEMS) as [System, (typeof SYSTEMS)[System]][];
  let lastLang: { turns: number; ms: number } | undefined;
  for (const turns of [...TURNS].sort((a, b) => a - b)) {
    const w = workload(turns);
    work.set(turns, w);
    const ran: [System, Ran][] = [];
    for (const [system, { label, run }] of systems) {
      if (EXTRAS.includes(system) && turns > EXTRAS_UP_TO) continue;
      if (system === "lang" && lastLang) {
        const predicted = lastLang.ms * (turns / lastLang.turns) ** 2;
        if (predicted > LANGGRAPH_BUDGET_MS) {
          skipped.push(
            `LangGraph.js at ${turns} turns skipped: its run would take about ${(predicted / 1000).toFixed(0)} s (${lastLang.turns} turns took ${(lastLang.ms / 1000).toFixed(1)} s; the time is quadratic in turns).`,
          );
          continue;
        }
      }
      const t = performance.now();
      const r = await run(dir, w);
      ran.push([system, r]);
      if (system === "lang") {
        langTables.set(turns, langGraphTables(r.file));
        lastLang = { turns, ms: r.runMs };
      }
      console.error(`  ${turns} turns, ${label}: ${((performance.now() - t) / 1000).toFixed(1)} s`);
    }
    const timedResumes = await timeResumes(ran.map(([, r]) => r));
    ran.forEach(([system, r], i) => {
      results.set(key(system, turns), timedResumes[i] as Result);
      if (system.startsWith("lang")) rmSync(r.file, { force: true }); // hundreds of MB at 400 turns
    });
  }

  const rows: Record<string, string | number>[] = [];
  for (const turns of TURNS) {
    const w = work.get(turns) as Workload;
    for (const [system, { label }] of systems) {
      const r = result(system, turns);
      if (!r) continue;
      rows.push({
        turns,
        system: label,
        "rows bytes": r.storage.rows,
        "B/turn": Math.round(r.storage.rows / turns),
        "× floor": r.storage.rows / w.floor,
        "file bytes": r.storage.file,
        "run ms": Math.round(r.runMs),
        "run CPU ms": Math.round(r.runCpuMs),
        "resume ms": r.resumeMs,
      });
    }
    rows.push({
      turns,
      system: "floor (tool outputs)",
      "rows bytes": w.floor,
      "B/turn": Math.round(w.floor / turns),
      "× floor": 1,
      "file bytes": "",
      "run ms": "",
      "run CPU ms": "",
      "resume ms": "",
    });
  }
  printTable(
    `Loom vs LangGraph.js, SQLite, one 1.5–4 kB tool output a turn (run: Loom median of ${LOOM_REPEATS}, LangGraph median of 3 at ≤ 100 turns, else 1 run; resume: cold, best of ${RESUME_REPEATS}; sync NORMAL unless said)`,
    rows,
  );
  for (const line of skipped) console.log(`\n${line}`);

  // Targets: Loom (lean and full) against the textbook LangGraph graph, both at sync NORMAL.
  const targets: Record<string, string | number>[] = [];
  const check = (what: string, measured: number | undefined, target: string, ok: (x: number) => boolean, digits = 3) =>
    targets.push(
      measured === undefined || Number.isNaN(measured)
        ? { what, measured: "n/a", target, met: "not measured" }
        : { what, measured: measured.toFixed(digits), target, met: ok(measured) ? "yes" : "NO" },
    );
  const ratioOf = (a: number | undefined, b: number | undefined) =>
    a === undefined || b === undefined ? undefined : a / b;
  const at = BREAKDOWN_TURNS;
  for (const system of ["loomLean", "loomFull"] as const) {
    const ratio = ratioOf(result(system, at)?.storage.rows, result("lang", at)?.storage.rows);
    check(`storage, ${SYSTEMS[system].label} / LangGraph, ${at} turns`, ratio, "≤ 0.0100", (x) => x <= 0.01, 4);
  }
  const [lo, hi] = [Math.min(...TURNS), Math.max(...TURNS)];
  if (lo !== hi) {
    for (const system of ["loomLean", "loomFull", "lang"] as const) {
      const perTurn = (n: number) => {
        const rows = result(system, n)?.storage.rows;
        return rows === undefined ? undefined : rows / n;
      };
      check(
        `bytes/turn ${hi} / ${lo} turns, ${SYSTEMS[system].label}`,
        ratioOf(perTurn(hi), perTurn(lo)),
        "0.90–1.10",
        (x) => x >= 0.9 && x <= 1.1,
      );
    }
  }
  const ratioChecks: [string, System, System, "runMs" | "runCpuMs" | "resumeMs", number][] = [
    ["run time", "loomLean", "lang", "runMs", 0.1],
    ["run time", "loomFull", "lang", "runMs", 0.1],
    ["run CPU time (no target)", "loomLean", "lang", "runCpuMs", 0.1],
    ["resume", "loomLean", "lang", "resumeMs", 0.5],
    ["resume", "loomFull", "lang", "resumeMs", 0.5],
    ["run time (both sync FULL; no target)", "loomLeanFsync", "langFsync", "runMs", 0.1],
  ];
  for (const [what, a, b, field, limit] of ratioChecks) {
    for (const turns of TURNS) {
      if (EXTRAS.includes(a) && turns > EXTRAS_UP_TO) continue;
      const ratio = ratioOf(result(a, turns)?.[field], result(b, turns)?.[field]);
      const label = `${what}, ${SYSTEMS[a].label.split(",")[0]} / LangGraph, ${turns} turns`;
      check(label, ratio, `≤ ${limit.toFixed(3)}`, (x) => x <= limit);
    }
  }
  for (const turns of TURNS) {
    const ratio = ratioOf(result("loomLean", turns)?.storage.rows, (work.get(turns) as Workload).floor);
    check(`storage, Loom lean / floor, ${turns} turns`, ratio, "≤ 1.150", (x) => x <= 1.15);
  }
  printTable("Targets (storage = rows bytes)", targets);

  // Where Loom's bytes go.
  const w = work.get(at) as Workload;
  const lean = result("loomLean", at) as Result;
  const full = result("loomFull", at) as Result;
  const { parts: leanParts, ofWhich: leanOf } = loomByteParts(lean.file);
  const { parts: fullParts, ofWhich: fullOf } = loomByteParts(full.file);
  const breakdown: Record<string, string | number>[] = [];
  const line = (part: string, leanBytes: number, fullBytes: number) =>
    breakdown.push({
      part,
      "lean B/turn": leanBytes / at,
      "lean % floor": `${((100 * leanBytes) / w.floor).toFixed(1)}%`,
      "full B/turn": fullBytes / at,
      "full % floor": `${((100 * fullBytes) / w.floor).toFixed(1)}%`,
    });
  for (const part of Object.keys(leanParts)) line(part, leanParts[part] ?? 0, fullParts[part] ?? 0);
  const sum = (p: Record<string, number>) => Object.values(p).reduce((a, b) => a + b, 0);
  line("= rows", sum(leanParts), sum(fullParts));
  line("  of which sha256 digests (32 B in a column, 64 B as hex)", leanOf.digests, fullOf.digests);
  line("  of which frame/step id strings", leanOf.ids, fullOf.ids);
  line("index UNIQUE (run, seq) (file only)", lean.storage.index, full.storage.index);
  line(
    "page slack + schema + empty tables (file only)",
    lean.storage.file - lean.storage.rows - lean.storage.index,
    full.storage.file - full.storage.rows - full.storage.index,
  );
  line("= file", lean.storage.file, full.storage.file);
  printTable(`Loom's bytes per turn, ${at} turns (floor: ${(w.floor / at).toFixed(0)} B/turn)`, breakdown);

  const lgRows = TURNS.flatMap((turns) => {
    const tables = langTables.get(turns);
    const r = result("lang", turns);
    if (!tables || !r) return [];
    return [
      {
        turns,
        checkpoints: tables.count,
        "checkpoints rows bytes": tables.checkpoints,
        "writes rows bytes": tables.writes,
        "resume: invoke(null) ms": r.resumeMs,
        "getState ms": r.stateMs ?? 0,
      },
    ];
  });
  printTable(
    "LangGraph.js (MessagesAnnotation): where its bytes go (every checkpoint holds the whole message list)",
    lgRows,
  );
  console.log(`\nwhole bench: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  printResult("vs-langgraph", {
    targets: targets.map((t) => ({ what: t.what, measured: Number(t.measured), target: t.target, met: t.met })),
    met: targets.every((t) => t.met !== "NO"),
    skipped,
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}

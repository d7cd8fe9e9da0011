import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import type { Command } from "commander";
import { openSqliteJournal, readJournal } from "../../index.ts";
import { foldRun } from "../../journal.ts";
import { DEFAULT_DB, dbPath, openJournalFile } from "../db.ts";
import { runWorkerAndKill } from "../demo/crash.ts";
import { MAX_DEMO_TURNS } from "../demo/loop.ts";
import { runDemoSession } from "../demo/session.ts";
import { measureRun, type RunFigures } from "../demo/summary.ts";
import { count, int, kB, oneLine } from "../format.ts";
import { type CliIo, println, UsageError } from "../io.ts";
import { PG_ENV } from "../journalSource.ts";
import { type CommonOptions, integerOption, withCommon } from "../options.ts";
import { loomCommand, packageRoot } from "../packageRoot.ts";
import { progressBar } from "../progress.ts";

interface DemoOptions extends CommonOptions {
  readonly turns: number;
  readonly json?: boolean;
}

/** A new run id for every demo run: nothing earlier is overwritten. */
export const newDemoRunId = (now = new Date()): string =>
  `demo-${now.toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "-")}-${randomBytes(2).toString("hex")}`;

/**
 * `loom demo`: the workload the lean log was designed on, on SQLite, crashed once (a child process
 * killed) and resumed.
 */
export function registerDemo(program: Command, io: CliIo): void {
  withCommon(program.command("demo"))
    .description(
      "run a 200-turn agent loop (lean log) on SQLite, kill it mid-run with SIGKILL, resume it, and measure it",
    )
    .option("--turns <n>", `tool calls in the run (2–${MAX_DEMO_TURNS})`, integerOption(2), 200)
    .option("--json", "print the summary as JSON (progress stays on stderr)")
    .action(async (options: DemoOptions) => {
      if (options.turns > MAX_DEMO_TURNS)
        throw new UsageError(`--turns: at most ${MAX_DEMO_TURNS}, got ${options.turns}`);
      const path = dbPath(io, options.db);
      // The demo adds a run to an existing journal; another application's database is refused untouched.
      if (existsSync(path)) await openJournalFile(path, { create: false }).close();
      const root = packageRoot();
      const runId = newDemoRunId();
      const { turns } = options;
      const crashAt = Math.floor(turns / 2);
      const bar = progressBar(io.stderr, turns);
      bar.note(`Loom demo: run ${runId}, ${turns} turns, lean tool-call log, journal ${path}`);
      bar.note(`▶ a child process runs the loop; it will be killed (SIGKILL) in turn ${crashAt}`);
      const crash = await runWorkerAndKill({ root, db: path, runId, turns, crashAt, onProgress: bar.update });
      bar.note(`✗ killed the worker (pid ${crash.pid}, ${crash.signal}) while ${crash.stepId} was running`);
      const journal = openSqliteJournal(path);
      try {
        const atCrash = await foldRun(journal, runId);
        const entriesAtCrash = (await readJournal(journal, runId)).length;
        const frame = atCrash.frames[crash.stepId]?.status ?? "absent";
        bar.note(
          `  journal: ${entriesAtCrash} entries, run ${atCrash.status}, ${crash.stepId} ${frame} (outcome unknown)`,
        );
        bar.note("▶ resuming in this process: loop.run({ runId, journal }) with the same loop");
        const started = Date.now();
        const resumed = await runDemoSession({ journal, runId, root, onProgress: bar.update });
        bar.done();
        const figures = await measureRun(journal, runId, resumed.output);
        const summary = {
          runId,
          db: path,
          turns,
          crash: {
            pid: crash.pid,
            signal: crash.signal,
            stepId: crash.stepId,
            entries: entriesAtCrash,
            status: atCrash.status,
            frame,
          },
          resume: { modelCalls: resumed.modelCalls, toolCalls: resumed.toolCalls },
          ms: { worker: crash.ms, resume: Date.now() - started },
          ...figures,
          lean: undefined,
          firstLeanEntries: figures.lean.slice(0, 3),
        };
        if (options.json) return println(io.stdout, JSON.stringify(summary, null, 2));
        // With LOOM_PG_URL set, a command without --db reads PostgreSQL: the hints name the file.
        const nameFile = io.env?.[PG_ENV.url] !== undefined;
        printSummary(io, runId, crashAt, summary, figures, commandsFor(runId, options.db, figures, nameFile));
      } finally {
        await journal.close();
      }
    });
}

function printSummary(
  io: CliIo,
  runId: string,
  crashAt: number,
  s: { resume: { modelCalls: number; toolCalls: number }; ms: { worker: number; resume: number } },
  f: RunFigures,
  commands: readonly string[],
) {
  const out = (line = "") => println(io.stdout, line);
  const saved = f.foldedState.full > 0 ? (100 * (f.foldedState.full - f.foldedState.lean)) / f.foldedState.full : 0;
  out();
  out(`Run ${runId}: ${f.status} after the crash.`);
  out(`  iterations     ${count(f.iterations, "model call")}, ${count(f.toolCalls, "tool call")}`);
  out(`  entries        ${int(f.entries)}`);
  out(`  journal bytes  ${kB(f.journalBytes)} (the entries as stored: type, data, meta)`);
  out(`  folded state   full ${kB(f.foldedState.full)} → lean ${kB(f.foldedState.lean)} (−${saved.toFixed(1)}%)`);
  out("                 JSON of foldRun(journal, runId), the loop's value holding the log in each shape");
  out(`  loop's value   full ${kB(f.output.full)} → lean ${kB(f.output.lean)} ({ content, toolCallLog, iterations })`);
  out(
    `  resume         ran ${count(s.resume.modelCalls, "model call")} and ${count(s.resume.toolCalls, "tool call")} (turn ${crashAt} on);`,
  );
  out(
    `                 turns 0–${crashAt - 1} were served from the journal, ${crashAt}'s tool ran again (same stepId)`,
  );
  out(
    `  log            ${f.logIntact ? "the returned log equals the log rebuilt from the journal ✓" : "DIFFERS from the log rebuilt from the journal ✗"}`,
  );
  out(
    `  time           ${(s.ms.worker / 1000).toFixed(1)} s in the worker, ${(s.ms.resume / 1000).toFixed(1)} s resuming`,
  );
  out();
  out("First lean entries (the output itself stays in the journal: resolve the stepId):");
  for (const entry of f.lean.slice(0, 3)) out(`  ${oneLine(entry)}`);
  out();
  out("Look further:");
  for (const command of commands) out(`  ${command}`);
}

function commandsFor(runId: string, db: string, f: RunFigures, nameFile: boolean): string[] {
  const dbFlag = db === DEFAULT_DB && !nameFile ? "" : ` --db ${db}`;
  const step = f.lean[0]?.stepId ?? "loom-demo#turn:0:tool:0";
  return [
    `runs${dbFlag}`,
    `log ${runId} --mode full${dbFlag}`,
    `show '${step}' --run ${runId}${dbFlag}`,
    `inspect ${runId}${dbFlag}`,
    `compact ${runId} --keep-turns 10${dbFlag}`,
  ].map((args) => loomCommand(args));
}

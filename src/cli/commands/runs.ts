import type { Command } from "commander";
import { escapeRunId, RUN_ID_RULE } from "../../journal.ts";
import { readRunRows } from "../../read/runRow.ts";
import { inTreeOrder } from "../../read/runsTree.ts";
import { sessionOfRun } from "../../read/session.ts";
import { statusLabel, stoppedOrNext } from "../activity.ts";
import { journalSource, type RunInfo, withJournal } from "../db.ts";
import { clip, int, kB, printable, table } from "../format.ts";
import { type CliIo, println } from "../io.ts";
import { type JournalCommonOptions, withJournalOptions } from "../options.ts";
import { printSessionRows, sessionRows, sessionRowsOf } from "./session.ts";

/** `loom runs`: every run of the journal, oldest first, each sub-agent's run under its parent. */
export function registerRuns(program: Command, io: CliIo): void {
  withJournalOptions(program.command("runs"))
    .description(
      "list the runs in the journal: loop, status, model calls, tokens (input/output), entries, bytes, why a run stopped; a sub-agent's run (agentTool) indented under its parent's. Status: running (a live process owns it), stalled (nobody does and it did not end: resume it), not started (a fork or a submitted run nobody resumed yet), waiting for approval, waiting (until <time>) or waiting for event [(times out <time>)] (a durable wait; loom waits lists them), answered (its approvals were answered: resume it), interrupted, completed, failed, cancelled. A run a schedule started (its id is <scheduleId>@<tick>) shows its schedule and tick in a schedule column",
    )
    .option(
      "--json",
      "print an array of runs as JSON (status: the journal's; activity: running, stalled, not-started, waiting-for-approval, answered…; a sub-agent's run with its parent: { runId, stepId }; a scheduled run with schedule: { scheduleId, tick }; a session's message with session: { sessionId, n })",
    )
    .option(
      "--session <sessionId>",
      "only the runs of one session (loop.send's sessionId): its messages' runs <sessionId>/<n> in order, and their sub-agents' runs",
    )
    .option(
      "--sessions",
      "one row per session instead of per run: its loop, messages, its last message's run and status, model calls and tokens of its messages, and how to resume it",
    )
    .action(async (options: JournalCommonOptions & { json?: boolean; session?: string; sessions?: boolean }) => {
      const source = journalSource(io, options);
      const path = source.label;
      let tree = await withJournal(source, async (journal) => {
        // Each run from its latest snapshot and the entries after it (src/read/runRow.ts).
        const { rows, parentOf } = await readRunRows(journal, (runId, problem) =>
          // Written before run ids had a rule: listed, but no store reads it any more.
          println(io.stderr, `loom: skipped run ${escapeRunId(runId)}: ${problem}; ${RUN_ID_RULE}`),
        );
        const out: RunInfo[] = [...rows];
        out.sort((a, b) => (a.startedAt ?? "").localeCompare(b.startedAt ?? "") || a.runId.localeCompare(b.runId));
        return inTreeOrder(out, parentOf).map(({ run, depth }) => {
          const parent = parentOf(run.runId);
          // A session's message (`<sessionId>/<n>`) says which, for --json.
          const session = parent === undefined ? sessionOfRun(run.runId) : undefined;
          return { run: { ...run, ...(parent ? { parent } : {}), ...(session ? { session } : {}) }, depth };
        });
      });
      if (options.sessions) return printSessionRows(io, sessionRowsOf(tree), options.json === true, path);
      if (options.session !== undefined) tree = sessionRows(tree, options.session, path);
      if (options.json)
        return println(
          io.stdout,
          JSON.stringify(
            tree.map((t) => t.run),
            null,
            2,
          ),
        );
      if (tree.length === 0) return println(io.stdout, `no runs in ${path}`);
      // A "schedule" column only when a schedule started some run: the schedule and its tick.
      const scheduled = tree.some(({ run }) => run.schedule !== undefined);
      const rows = tree.map(({ run: r, depth }) => [
        `${depth === 0 ? "" : `${"  ".repeat(depth - 1)}└ `}${printable(r.runId)}`,
        printable(r.loopId ?? "?"),
        statusLabel(r),
        int(r.iterations),
        r.tokens.input + r.tokens.output === 0 ? "-" : `${int(r.tokens.input)}/${int(r.tokens.output)}`,
        int(r.entries),
        kB(r.bytes),
        r.mode,
        (r.startedAt ?? "").replace("T", " ").slice(0, 19),
        ...(scheduled
          ? // The tick to the second: a seconds-level cron (`*/5 * * * * *`) fires within a minute.
            [r.schedule ? `${r.schedule.scheduleId} ${r.schedule.tick.replace("T", " ").slice(0, 19)}` : "-"]
          : []),
        clip(stoppedOrNext(r, source), source.kind === "postgres" ? 180 : 100),
      ]);
      println(
        io.stdout,
        table(
          [
            "run",
            "loop",
            "status",
            "model calls",
            "tokens in/out",
            "entries",
            "journal",
            "log",
            "started",
            ...(scheduled ? ["schedule"] : []),
            "stopped",
          ],
          rows,
          [3, 4, 5, 6],
        ),
      );
    });
}

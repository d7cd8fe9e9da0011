import type { Command } from "commander";
import { readJournal } from "../../index.ts";
import { dbPath, type RunInfo, runInfo, withJournal } from "../db.ts";
import { int, kB, printable, table } from "../format.ts";
import { type CliIo, println } from "../io.ts";
import { type CommonOptions, withCommon } from "../program.ts";

/** `loom runs`: every run of the journal, oldest first. */
export function registerRuns(program: Command, io: CliIo): void {
  withCommon(program.command("runs"))
    .description("list the runs in the journal: loop, status, model calls, entries, bytes")
    .option("--json", "print an array of runs as JSON")
    .action(async (options: CommonOptions & { json?: boolean }) => {
      const path = dbPath(io, options.db);
      const runs = await withJournal(path, async (journal) => {
        const out: RunInfo[] = [];
        for (const { runId } of await journal.store.listRuns())
          out.push(runInfo(runId, await readJournal(journal, runId)));
        return out.sort(
          (a, b) => (a.startedAt ?? "").localeCompare(b.startedAt ?? "") || a.runId.localeCompare(b.runId),
        );
      });
      if (options.json) return println(io.stdout, JSON.stringify(runs, null, 2));
      if (runs.length === 0) return println(io.stdout, `no runs in ${path}`);
      const rows = runs.map((r) => [
        printable(r.runId),
        printable(r.loopId ?? "?"),
        r.status,
        int(r.iterations),
        int(r.entries),
        kB(r.bytes),
        r.mode,
        (r.startedAt ?? "").replace("T", " ").slice(0, 19),
      ]);
      println(
        io.stdout,
        table(["run", "loop", "status", "model calls", "entries", "journal", "log", "started"], rows, [3, 4, 5]),
      );
    });
}

import type { Command } from "commander";
import { compact } from "../../journal.ts";
import { dbPath, readRun, runInfo, sqliteSource, withWritableJournal } from "../db.ts";
import { count, int, kB, printable } from "../format.ts";
import { type CliIo, println } from "../io.ts";
import { type CommonOptions, integerOption, withCodecKeys, withCommon } from "../options.ts";

/** `loom compact <runId> --keep-turns N`: old tool frames to the archive, one verified marker in their place. */
export function registerCompact(program: Command, io: CliIo): void {
  withCodecKeys(withCommon(program.command("compact")))
    .description("move the tool frames of a run's older turns to the archive (the logs and `show` still read them)")
    .argument("<runId>", "the run (see `loom runs`)")
    .requiredOption(
      "--keep-turns <n>",
      "how many of the last turns keep their tool frames in the journal",
      integerOption(0),
    )
    .option("--json", "print the result as JSON")
    .action(async (runId: string, options: CommonOptions & { keepTurns: number; json?: boolean }) => {
      const path = dbPath(io, options.db);
      const result = await withWritableJournal(sqliteSource(io, options), async (journal) => {
        const before = runInfo(runId, await readRun(journal, runId, path));
        const done = await compact(journal, runId, { keepTurns: options.keepTurns });
        const after = runInfo(runId, await readRun(journal, runId, path));
        return { runId, moved: done.frameIds.length, archiveRef: done.archiveRef, before, after };
      });
      if (options.json) {
        const { before, after } = result;
        return println(
          io.stdout,
          JSON.stringify(
            {
              ...result,
              before: { entries: before.entries, bytes: before.bytes },
              after: { entries: after.entries, bytes: after.bytes },
            },
            null,
            2,
          ),
        );
      }
      const { moved, archiveRef, before, after } = result;
      if (moved === 0) {
        return println(
          io.stdout,
          `run ${printable(runId)}: nothing to compact (no completed tool frame older than the last ${count(options.keepTurns, "turn")})`,
        );
      }
      println(
        io.stdout,
        `run ${printable(runId)}: moved ${count(moved, "tool frame")} to archive ${archiveRef}, kept the last ${count(options.keepTurns, "turn")} in the journal`,
      );
      println(
        io.stdout,
        `  journal: ${int(before.entries)} → ${count(after.entries, "entry", "entries")}, ${kB(before.bytes)} → ${kB(after.bytes)}`,
      );
      println(io.stdout, "  `loom log` and `loom show` read the moved outputs back from the archive, digest verified");
    });
}

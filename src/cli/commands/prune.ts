import { type Command, InvalidArgumentError, Option } from "commander";
import type { OpenJournal } from "../../index.ts";
import { type PruneResult, pruneRuns } from "../../journal.ts";
import { journalSource, withJournal } from "../db.ts";
import { int } from "../format.ts";
import { type CliIo, println } from "../io.ts";
import { integerOption, type JournalCommonOptions, withJournalOptions } from "../options.ts";

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** Parses a duration such as `7d`, `12h`, `30m`, `90s` (a usage error otherwise) into ms. */
export function parseDuration(value: string): number {
  const m = /^(\d+)(ms|s|m|h|d|w)$/.exec(value.trim());
  if (!m) throw new InvalidArgumentError(`expected a duration such as 7d, 12h, 30m or 90s, got "${value}"`);
  return Number(m[1]) * (UNITS[m[2] as string] as number);
}

interface PruneCliOptions extends JournalCommonOptions {
  readonly completedBefore: number;
  /** `--schema`: 0.2's spelling of `--pg-schema`, still taken. */
  readonly schema?: string;
  readonly batch: number;
  readonly dryRun?: boolean;
  readonly json?: boolean;
}

/** `loom prune --completed-before 7d`: retention for finished runs, their blobs and archives. */
export function registerPrune(program: Command, io: CliIo): void {
  withJournalOptions(program.command("prune"))
    .description(
      "remove runs that completed, failed or were cancelled longer ago than a duration, with their archived frames and the blobs no other run names (interrupted runs are kept: they can be resumed; a cancelled one cannot)",
    )
    .requiredOption(
      "--completed-before <duration>",
      "how long ago a run must have finished: 7d, 12h, 30m, 90s",
      parseDuration,
    )
    .addOption(new Option("--schema <name>").hideHelp().conflicts("pgSchema"))
    .option("--batch <n>", "runs removed per transaction", integerOption(1), 100)
    .option("--dry-run", "count what would go, remove nothing")
    .option("--json", "print the counts as JSON")
    .action(async (options: PruneCliOptions) => {
      const cutoff = Date.now() - options.completedBefore;
      const prune = (journal: OpenJournal) =>
        pruneRuns(journal, { completedBefore: cutoff, batchSize: options.batch, dryRun: options.dryRun ?? false });
      const source = journalSource(io, { ...options, pgSchema: options.pgSchema ?? options.schema });
      const where = source.label;
      const result: PruneResult = await withJournal(source, prune);
      if (options.json)
        return println(
          io.stdout,
          JSON.stringify(
            { ...result, dryRun: options.dryRun ?? false, cutoff: new Date(cutoff).toISOString() },
            null,
            2,
          ),
        );
      const verb = options.dryRun ? "would remove" : "removed";
      println(
        io.stdout,
        `${where}: ${verb} ${int(result.runs)} runs finished before ${new Date(cutoff).toISOString()} (${int(result.entries)} entries, ${int(result.archives)} archived batches, ${int(result.blobs)} blobs no other run names)`,
      );
    });
}

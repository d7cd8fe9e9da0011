import { type Command, Option } from "commander";
import { type AgentStep, type LeanAgentStep, rebuildToolCallLog, type ToolCallLogMode } from "../../index.ts";
import { isFullToolCallLog } from "../../journal.ts";
import { journalSource, readRun, runInfo, stoppedText, withJournal } from "../db.ts";
import { clip, count, int, oneLine, printable, shortDigest, table } from "../format.ts";
import { type CliIo, println } from "../io.ts";
import { type JournalCommonOptions, withJournalOptions } from "../options.ts";

interface LogOptions extends JournalCommonOptions {
  readonly mode?: ToolCallLogMode;
  readonly json?: boolean;
}

/** `loom log <runId>`: the run's tool-call log, rebuilt from the journal in either shape. */
export function registerLog(program: Command, io: CliIo): void {
  withJournalOptions(program.command("log"))
    .description("print a run's tool-call log, rebuilt from its journal (any point of the run, compacted or not)")
    .argument("<runId>", "the run (see `loom runs`)")
    .addOption(
      new Option("--mode <mode>", "the log's shape (default: the run's recorded shape)").choices(["full", "lean"]),
    )
    .option("--json", "print the log as a JSON array")
    .action(async (runId: string, options: LogOptions) => {
      const source = journalSource(io, options);
      const path = source.label;
      const { info, log } = await withJournal(source, async (journal) => {
        const entries = await readRun(journal, runId, path);
        const info = runInfo(runId, entries);
        const log = await rebuildToolCallLog(journal, runId, options.mode ?? info.mode);
        return { info, log };
      });
      if (options.json) return println(io.stdout, JSON.stringify(log, null, 2));
      const mode = options.mode ?? info.mode;
      println(
        io.stdout,
        `run ${printable(runId)} · loop ${printable(info.loopId ?? "?")} · ${info.interrupted ? `${info.status} (${stoppedText(info)})` : info.status} · ${count(info.iterations, "model call")} · ${count(log.length, "tool call")} · ${mode} log (recorded shape: ${info.mode})`,
      );
      if (log.length === 0) return println(io.stdout, "no tool call has ended yet");
      println(
        io.stdout,
        isFullToolCallLog(log) && mode === "full" ? fullTable(log, io) : leanTable(log as LeanAgentStep[]),
      );
    });
}

function leanTable(log: readonly LeanAgentStep[]): string {
  const rows = log.map((e) => [
    String(e.iteration),
    printable(e.toolName),
    e.status,
    int(e.bytes),
    shortDigest(e.digest),
    printable(e.stepId),
  ]);
  return table(["iter", "tool", "status", "bytes", "digest", "stepId"], rows, [0, 3]);
}

function fullTable(log: readonly AgentStep[], io: CliIo): string {
  const width = Math.max(40, (io.stdout.columns ?? 120) - 60);
  const rows = log.map((e) => [
    String(e.iteration),
    printable(e.toolName),
    clip(oneLine(e.toolInput), 36),
    clip(oneLine(e.toolOutput), width),
  ]);
  return table(["iter", "tool", "input", "output"], rows, [0]);
}

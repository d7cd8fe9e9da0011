import { type Command, Option } from "commander";
import { diffRuns, type RunDiff } from "../../index.ts";
import { type CallChange, type DiffCall, type DiffMatchMode, readDiffSide } from "../../journal.ts";
import { journalSource, readRun, sqliteSource, withJournal } from "../db.ts";
import { count, printable, shortDigest, table } from "../format.ts";
import { CliError, type CliIo, println } from "../io.ts";
import { type JournalCommonOptions, withJournalOptions } from "../options.ts";

interface DiffCommandOptions extends JournalCommonOptions {
  readonly against?: string;
  readonly match?: DiffMatchMode;
  readonly json?: boolean;
  readonly failOnDiff?: boolean;
}

/** The mark of each change in the call table. */
const MARK: Record<CallChange, string> = {
  same: "=",
  "input-changed": "~",
  added: "+",
  removed: "-",
  reordered: "↕",
  "status-changed": "!",
  "output-changed": "*",
};

/** `loom diff <runA> <runB>`: two runs' tool-call logs side by side, calls aligned, the first divergence named. */
export function registerDiff(program: Command, io: CliIo): void {
  withJournalOptions(program.command("diff"))
    .description(
      "compare two runs' tool calls: aligned over tool and input digest, each same, changed, added, removed or reordered",
    )
    .argument("<runA>", "the run to compare against (the recorded one)")
    .argument("<runB>", "the run compared (a replay, or a later run of the same input)")
    .option("--against <file>", "read <runB> from this SQLite journal (a replay's journal) instead of the first one")
    .addOption(
      new Option(
        "--match <mode>",
        "what counts as passing: strict (default), unordered, subset (b ⊆ a), superset (b ⊇ a)",
      ).choices(["strict", "unordered", "subset", "superset"]),
    )
    .option("--json", "print the diff as JSON")
    .option("--fail-on-diff", "exit with code 1 when the runs do not match in the --match mode (for CI)")
    .addHelpText(
      "after",
      [
        "",
        "Marks: = same, ~ input changed (a JSON Patch follows), + added in runB, - removed from runA,",
        "↕ reordered, ! status changed, * output changed.",
        "",
        "Example: loom diff order-42 order-42 --against replays.db --match superset --fail-on-diff",
      ].join("\n"),
    )
    .action(async (runA: string, runB: string, options: DiffCommandOptions) => {
      const first = journalSource(io, options);
      const sideA = await withJournal(first, async (journal) => {
        await readRun(journal, runA, first.label);
        return readDiffSide(journal, runA);
      });
      const second = options.against ? sqliteSource(io, { ...options, db: options.against }) : first;
      const sideB = await withJournal(second, async (journal) => {
        await readRun(journal, runB, second.label);
        return readDiffSide(journal, runB);
      });
      const diff = diffRuns(sideA, sideB, { match: options.match ?? "strict" });
      if (options.json) println(io.stdout, JSON.stringify(diff, null, 2));
      else println(io.stdout, render(runA, runB, diff));
      if (options.failOnDiff && !diff.pass) {
        throw new CliError(
          "runsDiffer",
          `${printable(runB)} does not match ${printable(runA)} (${diff.match}): ${summary(diff)}`,
        );
      }
    });
}

function summary(diff: RunDiff): string {
  const parts = (Object.entries(diff.counts) as [CallChange, number][])
    .filter(([change, n]) => n > 0 && change !== "same")
    .map(([change, n]) => `${n} ${change}`);
  return parts.length > 0
    ? parts.join(", ")
    : diff.answer && !diff.answer.same
      ? "the answers differ"
      : "the model calls differ";
}

function render(runA: string, runB: string, diff: RunDiff): string {
  const lines = [
    `${printable(runA)} → ${printable(runB)} · ${diff.identical ? "identical" : summary(diff)} · ${diff.match}: ${diff.pass ? "pass" : "FAIL"}`,
  ];
  if (diff.firstDivergence) {
    const d = diff.firstDivergence;
    lines.push(`first divergence: turn ${d.turn}${d.stepId ? ` (${printable(d.stepId)})` : ""}: ${d.what}`);
  }
  if (diff.calls.length === 0) lines.push(count(0, "tool call"));
  else {
    const rows = diff.calls.map((call) => row(call));
    lines.push(table(["", "iter", "tool", "a", "b", "change"], rows, [1]));
    for (const call of diff.calls) {
      if (!call.patch) continue;
      const at = call.b?.stepId ?? `b[${call.b?.index}]`;
      for (const op of call.patch) {
        const value = "value" in op ? ` ${printable(JSON.stringify(op.value))}` : "";
        lines.push(`  ~ ${printable(at)}: ${op.op} ${printable(op.path || "/")}${value}`);
      }
    }
  }
  const deltas = Object.entries(diff.deltas)
    .filter(([, d]) => d !== undefined)
    .map(([name, d]) => `${name} ${d.a} → ${d.b} (${d.delta >= 0 ? "+" : ""}${Number(d.delta.toFixed(6))})`);
  lines.push(deltas.join(" · "));
  if (diff.answer && !diff.answer.same) {
    lines.push(
      `answer a: ${printable(diff.answer.a.slice(0, 200))}`,
      `answer b: ${printable(diff.answer.b.slice(0, 200))}`,
    );
  }
  return lines.join("\n");
}

function row(call: DiffCall): string[] {
  const side = call.b ?? call.a;
  const describe = (s: DiffCall["a"]) =>
    s ? `#${s.index} ${s.status ?? ""} ${shortDigest(s.outputDigest)}`.replace("  ", " ") : "";
  return [
    MARK[call.change],
    String(side?.iteration ?? ""),
    printable(side?.toolName ?? ""),
    describe(call.a),
    describe(call.b),
    `${call.change}${call.moved ? " (moved)" : ""}`,
  ];
}

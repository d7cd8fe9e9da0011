import type { Command } from "commander";
import { parseFrameId, readJournal, runIdProblem } from "../../index.ts";
import { dbPath, type RunInfo, runInfo, stoppedText, withJournal } from "../db.ts";
import { count, int, printable } from "../format.ts";
import { type CliIo, println } from "../io.ts";
import { type CommonOptions, withCommon } from "../program.ts";
import { showStep } from "../step.ts";

interface ShowOptions extends CommonOptions {
  readonly run?: string;
  readonly json?: boolean;
}

/** `loom show <stepId>`: one step's full output, its digest checked against what vouches for it. */
export function registerShow(program: Command, io: CliIo): void {
  withCommon(program.command("show"))
    .description("print a step's full output (a lean entry's stepId), its digest verified; or a run's summary")
    .argument(
      "<stepId>",
      "a step id: a tool's, e.g. 'loom-demo#turn:3:tool:0', or a model call's, 'loom-demo#turn:3:model' (quote it: it holds a #); or a run id: its status and why it stopped",
    )
    .option("--run <runId>", "the run holding the step (needed when several runs of one loop are in the journal)")
    .option("--json", "print the resolved step as JSON")
    .action(async (stepId: string, options: ShowOptions) => {
      const path = dbPath(io, options.db);
      const run = await runNamed(path, stepId);
      if (run !== undefined) return printRun(io, run, options.json === true);
      const shown = await withJournal(path, (journal) => showStep(journal, stepId, options.run));
      if (options.json) return println(io.stdout, JSON.stringify(shown, null, 2));
      const { runId, kind, toolName, iteration, status, source, digest, bytes, verified, output } = shown;
      println(io.stdout, `step    ${printable(stepId)}`);
      println(io.stdout, `run     ${printable(runId)}`);
      const what =
        kind === "model"
          ? `model   the model's response (iteration ${iteration})`
          : `tool    ${printable(toolName ?? "?")} (iteration ${iteration ?? "?"})`;
      println(io.stdout, `${what}, status ${status}, read from the ${source}`);
      println(io.stdout, `digest  ${digest} (${count(bytes, "byte")})`);
      println(
        io.stdout,
        `        ${verified.length > 0 ? `verified: ${verified.join("; ")}` : "not verified: nothing else records it yet (the run stopped before its next model call)"}`,
      );
      println(io.stdout, "output:");
      println(io.stdout, JSON.stringify(output, null, 2) ?? "undefined");
    });
}

/** The run an argument names, when it is no step id but the id of a run in the journal. */
async function runNamed(path: string, arg: string): Promise<RunInfo | undefined> {
  if (parseFrameId(arg) !== undefined || runIdProblem(arg) !== undefined) return undefined;
  return withJournal(path, async (journal) => {
    if (!(await journal.store.listRuns()).some((r) => r.runId === arg)) return undefined;
    return runInfo(arg, await readJournal(journal, arg));
  });
}

function printRun(io: CliIo, run: RunInfo, json: boolean): void {
  if (json) {
    println(io.stdout, JSON.stringify(run, null, 2));
    return;
  }
  println(io.stdout, `run     ${run.runId}`); // a valid run id: no control character to escape
  println(io.stdout, `loop    ${run.loopId ?? "?"}`);
  println(
    io.stdout,
    `status  ${run.status}, ${int(run.iterations)} model calls, ${int(run.entries)} entries, ${run.mode} log`,
  );
  if (run.interrupted) println(io.stdout, `stopped ${stoppedText(run)}`);
}

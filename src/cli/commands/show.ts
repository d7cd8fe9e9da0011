import type { Command } from "commander";
import {
  foldRun,
  hydrateArchived,
  isStepResolutionError,
  type Journal,
  parseFrameId,
  projectToolCallLog,
  type ResolvedStep,
  type RunState,
  readJournal,
  resolveStep,
  runIdProblem,
  verifyTurnResults,
} from "../../index.ts";
import { dbPath, type RunInfo, runInfo, stoppedText, withJournal } from "../db.ts";
import { int } from "../format.ts";
import { CliError, type CliIo, println } from "../io.ts";
import { type CommonOptions, withCommon } from "../program.ts";

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
      "a tool step id, e.g. 'loom-demo#turn:3:tool:0' (quote it: it holds a #), or a run id: its status and why it stopped",
    )
    .option("--run <runId>", "the run holding the step (needed when several runs of one loop are in the journal)")
    .option("--json", "print the resolved step as JSON")
    .action(async (stepId: string, options: ShowOptions) => {
      const path = dbPath(io, options.db);
      const run = await runNamed(path, stepId);
      if (run !== undefined) return printRun(io, run, options.json === true);
      const shown = await withJournal(path, async (journal) => {
        const step = await resolve(journal, stepId, options.run);
        // One fold of the run serves the log entry and the checks.
        const state = await hydrateArchived(journal, await foldRun(journal, step.runId));
        const entry = projectToolCallLog(state, "lean").find((e) => e.stepId === stepId);
        return {
          ...step,
          toolName: entry?.toolName,
          iteration: entry?.iteration,
          verified: await verify(journal, state, step),
        };
      });
      if (options.json) return println(io.stdout, JSON.stringify(shown, null, 2));
      const { runId, toolName, iteration, status, source, digest, bytes, verified, output } = shown;
      println(io.stdout, `step    ${stepId}`);
      println(io.stdout, `run     ${runId}`);
      println(
        io.stdout,
        `tool    ${toolName ?? "?"} (iteration ${iteration ?? "?"}), status ${status}, read from the ${source}`,
      );
      println(io.stdout, `digest  ${digest} (${int(bytes)} bytes)`);
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

async function resolve(journal: Journal, stepId: string, runId: string | undefined): Promise<ResolvedStep> {
  try {
    return await resolveStep(journal, stepId, runId === undefined ? undefined : { runId });
  } catch (e) {
    if (isStepResolutionError(e) && e.code === "ambiguousStep") {
      throw new CliError("ambiguousStep", e.message.replace("pass { runId } to resolveStep", "pass --run <runId>"));
    }
    throw e;
  }
}

/**
 * What vouches for the resolved output: the compaction marker's digest (checked by resolveStep),
 * the blob's own hash (claim-check), and the prompt digest of the model call that followed, which
 * covers everything fed back in that turn (`IntegrityError` when it no longer does).
 */
async function verify(journal: Journal, state: RunState, step: ResolvedStep): Promise<string[]> {
  const verified: string[] = [];
  if (step.source === "archive") verified.push("the digest in the compaction's frames.archived marker");
  // resolveStep compared the output with the digest its frame recorded (frames written by Loom after 0.1.0).
  if (step.source === "frame" && state.frames[step.stepId]?.recorded) verified.push("the digest its frame recorded");
  if (step.claimCheck) verified.push("the blob's sha256 in its claim-check envelope");
  const turn = parseFrameId(step.stepId)?.turn;
  if (turn !== undefined) {
    const next = await verifyTurnResults(journal, state, turn);
    if (next) verified.push(`the prompt digest of the next model call (${next}) covers it`);
  }
  return verified;
}

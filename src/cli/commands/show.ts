import type { Command } from "commander";
import {
  digestOf,
  foldRun,
  IntegrityError,
  isLeanAgentStep,
  isStepResolutionError,
  type Journal,
  type LeanAgentStep,
  type ResolvedStep,
  rebuildToolCallLog,
  resolveStep,
  type ToolCallLog,
} from "../../index.ts";
import { dbPath, withJournal } from "../db.ts";
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
    .description("print a step's full output (a lean entry's stepId), its digest verified")
    .argument("<stepId>", "a tool step id, e.g. 'loom-demo#turn:3:tool:0' (quote it: it holds a #)")
    .option("--run <runId>", "the run holding the step (needed when several runs of one loop are in the journal)")
    .option("--json", "print the resolved step as JSON")
    .action(async (stepId: string, options: ShowOptions) => {
      const path = dbPath(io, options.db);
      const shown = await withJournal(path, async (journal) => {
        const step = await resolve(journal, stepId, options.run);
        const entry = (await rebuildToolCallLog(journal, step.runId, "lean")).find((e) => e.stepId === stepId);
        const recorded = await recordedEntry(journal, step.runId, stepId);
        return { ...step, toolName: entry?.toolName, iteration: entry?.iteration, verified: verify(step, recorded) };
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
        `        ${verified.length > 0 ? `verified: ${verified.join("; ")}` : "not verified: nothing else records it yet (the run has not completed)"}`,
      );
      println(io.stdout, "output:");
      println(io.stdout, JSON.stringify(output, null, 2) ?? "undefined");
    });
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

/** The entry of the run's recorded log (the loop's value, `run.completed`) for `stepId`, if it completed. */
async function recordedEntry(journal: Journal, runId: string, stepId: string) {
  const state = await foldRun(journal, runId);
  const log = (state._output as { toolCallLog?: ToolCallLog } | undefined)?.toolCallLog;
  if (!log) return undefined;
  // The full shape has no stepId: its entries are in the order of the lean projection's.
  const lean: LeanAgentStep[] = await rebuildToolCallLog(journal, runId, "lean");
  const index = lean.findIndex((e) => e.stepId === stepId);
  return index < 0 ? undefined : log[index];
}

/** What vouches for the resolved digest; an IntegrityError when the recorded log disagrees. */
function verify(step: ResolvedStep, recorded: ReturnType<typeof recordedEntry> extends Promise<infer T> ? T : never) {
  const verified: string[] = [];
  if (step.source === "archive") verified.push("the digest in the compaction's frames.archived marker");
  if (step.claimCheck) verified.push("the blob's sha256 in its claim-check envelope");
  if (recorded) {
    const expected = isLeanAgentStep(recorded) ? recorded.digest : digestOf(recorded.toolOutput).digest;
    if (expected !== step.digest) {
      throw new IntegrityError(
        `run ${step.runId}: step ${step.stepId}'s output hashes to ${step.digest}, but the run's recorded tool-call log says ${expected}; the journal was altered: restore it from a backup`,
      );
    }
    verified.push(`equals the run's recorded ${isLeanAgentStep(recorded) ? "lean log digest" : "full log output"}`);
  }
  return verified;
}

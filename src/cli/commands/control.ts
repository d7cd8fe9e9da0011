import { userInfo } from "node:os";
import type { Command } from "commander";
import { cancelRun, forkRun, listPendingApprovals, type OpenJournal, recordApproval } from "../../index.ts";
import { journalSource, withJournal, withWritableJournal } from "../db.ts";
import { clip, oneLine, printable, table } from "../format.ts";
import { CliError, type CliIo, println } from "../io.ts";
import { integerOption, type JournalCommonOptions, withJournalOptions } from "../options.ts";
import { subRunApprovalLines, subRunCancelLines } from "./subRunText.ts";

/** `loom approvals`, `loom approve`, `loom deny`, `loom cancel`, `loom fork`: operating runs from a shell. */
export function registerControl(program: Command, io: CliIo): void {
  withJournalOptions(program.command("approvals"))
    .description(
      "list the tool calls waiting for approval: run, step, tool, input, since when, until when; a call waiting in a sub-agent's run also names the parent run and call it waits under, and the root run to resume",
    )
    .option("--run <runId>", "only this run's")
    .option("--json", "print an array of pending approvals as JSON")
    .action(async (options: JournalCommonOptions & { run?: string; json?: boolean }) => {
      const source = journalSource(io, options);
      const path = source.label;
      const pending = await withJournal(source, (journal) =>
        listPendingApprovals(journal, options.run === undefined ? {} : { runId: options.run }),
      );
      if (options.json) return println(io.stdout, JSON.stringify(pending, null, 2));
      if (pending.length === 0) return println(io.stdout, `no tool call waits for approval in ${path}`);
      const rows = pending.map((p) => [
        printable(p.runId),
        printable(p.stepId),
        printable(p.toolName),
        clip(oneLine(p.input), 60),
        p.requestedAt.replace("T", " ").slice(0, 19),
        p.expiresAt === undefined ? "never" : p.expiresAt.replace("T", " ").slice(0, 19),
      ]);
      println(io.stdout, table(["run", "step", "tool", "input", "asked", "expires"], rows));
      for (const line of subRunApprovalLines(pending)) println(io.stdout, line);
      println(
        io.stdout,
        "answer with: loom approve <step> --run <run>   or   loom deny <step> --run <run> [--reason <text>]",
      );
    });

  const answer = (approved: boolean) => async (stepId: string, options: AnswerOptions) => {
    const source = journalSource(io, options);
    const path = source.label;
    const recorded = await withWritableJournal(source, async (journal) => {
      const runId = options.run ?? (await runWaitingFor(journal, stepId, path));
      return recordApproval(journal, runId, stepId, {
        approved,
        by: options.by ?? whoAmI(),
        ...(options.reason === undefined ? {} : { reason: options.reason }),
        ...(options.digest === undefined ? {} : { inputDigest: options.digest }),
      });
    });
    if (options.json) return println(io.stdout, JSON.stringify(recorded, null, 2));
    println(
      io.stdout,
      `run ${printable(recorded.runId)}: ${approved ? "approved" : "declined"} ${printable(recorded.toolName)} (${printable(stepId)}); it goes on when the run resumes (loop.run, or a PostgreSQL worker by itself)`,
    );
  };
  const answerCommand = (name: string, approved: boolean) =>
    withJournalOptions(program.command(name))
      .argument("<stepId>", "the waiting call's step id (see `loom approvals`; quote it: it holds a #)")
      .option("--run <runId>", "the run (needed when several runs wait for a step of that id)")
      .option("--by <name>", "who answers, journaled with the decision (default: the user name)")
      .option("--digest <inputDigest>", "refuse unless the call waits with this input digest (as listed)")
      .option("--json", "print what was journaled as JSON")
      .action(answer(approved));
  answerCommand("approve", true)
    .description("approve a tool call waiting for approval: journals the decision, bound to the call's input digest")
    .option("--reason <text>", "why, journaled with the decision");
  answerCommand("deny", false)
    .description(
      "decline a tool call waiting for approval: journals the decision; the model is told the call was declined (with the reason, when one is given)",
    )
    .option("--reason <text>", 'why, optional: the model is told "the call to <tool> was declined: <text>"');

  withJournalOptions(program.command("cancel"))
    .description(
      "cancel a run: a loop running it (any process) stops at its next step and journals run.cancelled; it is never resumed. Its sub-agents' runs are cancelled with it, each listed",
    )
    .argument("<runId>", "the run (see `loom runs`)")
    .option("--reason <text>", "why (journaled)", "cancelled with loom cancel")
    .option("--wait <ms>", "wait this long for a running loop to stop", integerOption(0), 5_000)
    .option("--json", "print the result as JSON")
    .action(async (runId: string, options: JournalCommonOptions & { reason: string; wait: number; json?: boolean }) => {
      const result = await withWritableJournal(journalSource(io, options), (journal) =>
        cancelRun(journal, runId, { reason: options.reason, waitMs: options.wait }),
      );
      if (options.json) return println(io.stdout, JSON.stringify({ runId, ...result }, null, 2));
      const h = result.holder;
      println(
        io.stdout,
        result.status === "cancelled"
          ? `run ${printable(runId)}: cancelled`
          : `run ${printable(runId)}: cancel requested; ${h ? `${printable(h.owner)} (pid ${h.pid} on ${printable(h.host)})` : "its owner"} stops it at its next step`,
      );
      for (const line of subRunCancelLines(result)) println(io.stdout, line);
    });

  withJournalOptions(program.command("fork"))
    .description("fork a run at a step (or seq): a new run with the source's history up to there, resumable from there")
    .argument("<runId>", "the source run (see `loom runs`); it is not changed")
    .requiredOption(
      "--at <stepId|seq>",
      "where the fork starts: a step id (run again on resume) or a seq of the source",
    )
    .option("--as <newRunId>", "the new run's id (default: <runId>-fork-<time>)")
    .option("--json", "print the result as JSON")
    .action(async (runId: string, options: JournalCommonOptions & { at: string; as?: string; json?: boolean }) => {
      const at = /^\d+$/.test(options.at) ? Number(options.at) : options.at;
      const newRunId = options.as ?? `${runId}-fork-${Date.now().toString(36)}`;
      const result = await withWritableJournal(journalSource(io, options), (journal) =>
        forkRun(journal, runId, { at, newRunId }),
      );
      if (options.json) return println(io.stdout, JSON.stringify(result, null, 2));
      println(
        io.stdout,
        `forked ${printable(runId)} at ${typeof at === "number" ? `seq ${at}` : printable(at)} into ${printable(result.runId)} (${result.entries} entries); resume it with loop.run({ runId: "${printable(result.runId)}", journal })`,
      );
    });
}

interface AnswerOptions extends JournalCommonOptions {
  readonly run?: string;
  readonly by?: string;
  readonly reason?: string;
  readonly digest?: string;
  readonly json?: boolean;
}

/** The one run waiting for approval of `stepId` (step ids repeat across runs of one loop). */
async function runWaitingFor(journal: OpenJournal, stepId: string, path: string): Promise<string> {
  const runs = (await listPendingApprovals(journal)).filter((p) => p.stepId === stepId).map((p) => p.runId);
  if (runs.length === 1) return runs[0] as string;
  if (runs.length === 0) {
    throw new CliError(
      "approvalNotPending",
      `no run in ${path} waits for approval of step ${printable(stepId)}; \`loom approvals\` lists what waits`,
    );
  }
  throw new CliError(
    "ambiguousStep",
    `step ${printable(stepId)} waits in ${runs.length} runs (${runs.map(printable).join(", ")}); pass --run <runId>`,
  );
}

function whoAmI(): string | undefined {
  try {
    return userInfo().username;
  } catch {
    return undefined;
  }
}

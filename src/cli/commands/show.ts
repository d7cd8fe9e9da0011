import type { Command } from "commander";
import { listPendingApprovals, type OpenJournal, type PendingApproval, readJournal } from "../../index.ts";
import { parseFrameId, runIdProblem } from "../../journal.ts";
import { scheduleText } from "../../read/runInfo.ts";
import { readSession, type SessionView, sessionOfRun } from "../../read/session.ts";
import { type RunStory, runStory } from "../../read/story.ts";
import { endText, rerunText, stepLabel } from "../../read/timeline.ts";
import { activityText, runInfoOf } from "../activity.ts";
import { type JournalSource, journalSource, type RunInfo, withJournal } from "../db.ts";
import { clip, count, int, oneLine, printable } from "../format.ts";
import { type CliIo, println } from "../io.ts";
import { type JournalCommonOptions, withJournalOptions } from "../options.ts";
import { type ShownStep, showStep } from "../step.ts";
import { printSession } from "./session.ts";

interface ShowOptions extends JournalCommonOptions {
  readonly run?: string;
  readonly json?: boolean;
}

/** `loom show <stepId>`: one step's full output, its digest checked against what vouches for it. */
export function registerShow(program: Command, io: CliIo): void {
  withJournalOptions(program.command("show"))
    .description(
      "print a step's full output (a lean entry's stepId), its digest verified, or what a step waiting for approval would run with; or a run's story: turns, model text, tools with status, time and bytes, approvals, tokens, why it stopped, and under a call that runs a sub-agent, its run (loom show <that run> tells its story)",
    )
    .argument(
      "<stepId>",
      "a step id: a tool's, e.g. 'loom-demo#turn:3:tool:0', or a model call's, 'loom-demo#turn:3:model' (quote it: it holds a #); or a run id: its story, the schedule and tick that started it (a run id <scheduleId>@<tick>), and why it stopped; or a session id (loop.send's sessionId): its messages, each the user's text, the answer, its run <sessionId>/<n> and its status",
    )
    .option("--run <runId>", "the run holding the step (needed when several runs of one loop are in the journal)")
    .option("--json", "print the resolved step as JSON")
    .action(async (stepId: string, options: ShowOptions) => {
      // One journal opened for the whole command (a PostgreSQL one is a pool and a probe each time).
      const shown = await withJournal(journalSource(io, options), async (journal): Promise<Shown> => {
        const run = await runNamed(journal, stepId);
        if (run !== undefined) return { run };
        const session = await sessionNamed(journal, stepId);
        if (session !== undefined) return { session };
        const waiting = (
          await listPendingApprovals(journal, options.run === undefined ? {} : { runId: options.run })
        ).filter((p) => p.stepId === stepId);
        if (waiting.length === 1) return { waiting: waiting[0] as PendingApproval };
        return { step: await showStep(journal, stepId, options.run) };
      });
      if ("run" in shown) return printStory(io, shown.run, options.json === true, journalSource(io, options));
      if ("session" in shown) return printSession(io, shown.session, options.json === true);
      if ("waiting" in shown) return printWaiting(io, shown.waiting, options.json === true);
      printStep(io, stepId, shown.step, options.json === true);
    });
}

/** What `loom show <arg>` found: a run's story, a call waiting for approval, or a step that ended. */
type Shown =
  | { readonly run: { info: RunInfo; story: RunStory } }
  | { readonly session: SessionView }
  | { readonly waiting: PendingApproval }
  | { readonly step: ShownStep };

/** `loom show <stepId>` of a step that ended: its output, digest and what verified it. */
function printStep(io: CliIo, stepId: string, shown: ShownStep, json: boolean): void {
  if (json) {
    println(io.stdout, JSON.stringify(shown, null, 2));
    return;
  }
  const { runId, kind, toolName, iteration, status, source, digest, bytes, verified, output } = shown;
  println(io.stdout, `step    ${printable(stepId)}`);
  println(io.stdout, `run     ${printable(runId)}`);
  const what =
    kind === "model"
      ? `model   the model's response (iteration ${iteration})`
      : `tool    ${printable(toolName ?? "?")} (iteration ${iteration ?? "?"})`;
  println(io.stdout, `${what}, status ${status}, read from the ${source}`);
  println(io.stdout, `digest  ${digest} (${count(bytes, "byte")})`);
  if (shown.redacted) {
    const r = shown.redacted;
    const how = [r.paths.length > 0 ? r.paths.join(", ") : "", r.fn ? "by the redaction function" : ""]
      .filter(Boolean)
      .join("; ");
    println(io.stdout, `redacted ${printable(how)}: the digest above is the original's (the lean log's);`);
    println(io.stdout, "        whoever holds the original checks it with verifyRedacted(original, entry)");
  }
  println(
    io.stdout,
    `        ${verified.length > 0 ? `verified: ${verified.join("; ")}` : shown.redacted ? "not verified: the output is redacted, and the digests cover the original" : "not verified: nothing else records it yet (the run stopped before its next model call)"}`,
  );
  println(io.stdout, "output:");
  println(io.stdout, JSON.stringify(output, null, 2) ?? "undefined");
}

/** The story of the run an argument names, when it is no step id but the id of a run in the journal. */
async function runNamed(journal: OpenJournal, arg: string): Promise<{ info: RunInfo; story: RunStory } | undefined> {
  // A sub-agent's run id (`<parent>/<stepId>`) reads as a step id too: a run of that id wins.
  if (runIdProblem(arg) !== undefined || (parseFrameId(arg) !== undefined && !arg.includes("/"))) return undefined;
  if (!(await journal.store.listRuns()).some((r) => r.runId === arg)) return undefined;
  const entries = await readJournal(journal, arg);
  const info = await runInfoOf(journal, arg, entries);
  return { info, story: await runStory(journal, arg, entries, info.activity) };
}

/** The session an argument names, when it is no step id and no run's id, but the id of a session (its runs `<id>/<n>`). */
async function sessionNamed(journal: OpenJournal, arg: string): Promise<SessionView | undefined> {
  if (runIdProblem(arg) !== undefined || parseFrameId(arg) !== undefined) return undefined;
  return readSession(journal, arg);
}

function printStory(
  io: CliIo,
  run: { info: RunInfo; story: RunStory },
  json: boolean,
  source: Pick<JournalSource, "kind">,
): void {
  const { info, story } = run;
  if (json) {
    println(io.stdout, JSON.stringify({ ...info, story }, null, 2));
    return;
  }
  const out = (line: string) => println(io.stdout, line);
  out(`run     ${info.runId}`); // a valid run id: no control character to escape
  out(`loop    ${printable(info.loopId ?? "?")}`);
  out(
    `status  ${activityText(info, source)}, ${int(info.iterations)} model calls, ${int(info.entries)} entries, ${info.mode} log`,
  );
  out(`time    ${info.startedAt ?? "?"} → ${info.updatedAt ?? "?"}`);
  if (info.schedule) out(`from    ${scheduleText(info)}`);
  if (story.parent)
    out(`parent  ${story.parent.runId}, its call ${printable(story.parent.stepId)} (a sub-agent's run)`);
  const session = story.parent ? undefined : sessionOfRun(info.runId);
  if (session) out(`session ${session.sessionId}, its message ${session.n}: loom show '${session.sessionId}'`);
  if (story.forkedFrom) {
    const f = story.forkedFrom;
    out(`fork    of ${printable(f.runId)} at ${f.stepId ? printable(f.stepId) : `seq ${f.seq}`}`);
  }
  out(`tokens  ${int(story.tokens.input)} in, ${int(story.tokens.output)} out`);
  const pending = new Map(story.pendingApprovals.filter((p) => p.runId === info.runId).map((p) => [p.stepId, p]));
  for (const t of story.turns) {
    const time = t.durationMs === undefined ? "" : `, ${int(t.durationMs)} ms`;
    const usage = t.usage ? `, ${int(t.usage.inputTokens ?? 0)}→${int(t.usage.outputTokens ?? 0)} tokens` : "";
    const retries = t.failedAttempts ? `, ${count(t.failedAttempts, "failed attempt")}` : "";
    out(
      `turn ${t.turn}  model ${stepLabel(t.status)}${time}${usage}${retries}${t.text ? `: ${clip(oneLine(t.text), 100)}` : ""}`,
    );
    for (const tool of t.tools) {
      const parts = [tool.reason ? `${stepLabel(tool.status)} (${tool.reason})` : stepLabel(tool.status)];
      if (tool.durationMs !== undefined) parts.push(`${int(tool.durationMs)} ms`);
      if (tool.bytes !== undefined) parts.push(count(tool.bytes, "byte"));
      if (tool.reruns) parts.push(rerunText(tool.reruns));
      if (tool.approval) {
        const who = tool.approval.by ? ` by ${printable(tool.approval.by)}` : "";
        const edited =
          "editedInput" in tool.approval
            ? ` with an edited input ${clip(printable(JSON.stringify(tool.approval.editedInput) ?? ""), 80)} (the model asked ${clip(printable(JSON.stringify(tool.input) ?? ""), 80)})`
            : "";
        const scope = tool.approval.scope ? ` for the rest of the ${tool.approval.scope}` : "";
        parts.push(`${tool.approval.approved ? "approved" : "declined"}${who}${edited}${scope}`);
      }
      const wait = pending.get(tool.stepId);
      if (wait) parts.push(`asked ${wait.requestedAt}${wait.expiresAt ? `, expires ${wait.expiresAt}` : ""}`);
      out(`        tool ${printable(tool.toolName)} ${printable(tool.stepId)}: ${parts.join(", ")}`);
      const sub = tool.subRun;
      if (sub) {
        const calls = count(sub.iterations, "model call");
        out(`          └ sub-agent ${printable(sub.loopId ?? "?")} ${sub.status}, ${calls}: loom show '${sub.runId}'`);
      }
    }
  }
  const end = story.ended;
  // The timeline's last word, as the viewer's run page ends its timeline.
  if (end?.type === "completed") out(`answer  ${clip(oneLine(end.content), 200)}`);
  else if (end) out(`stopped ${printable(endText(end, info.unresumable))}`);
  for (const p of story.pendingApprovals) {
    const where = p.runId === info.runId ? "" : ` in sub-agent run ${p.runId}`; // answered there, then resume this run
    out(
      `waiting ${printable(p.stepId)} (${printable(p.toolName)})${where} for approval: loom approve '${printable(p.stepId)}' --run ${where ? `'${p.runId}'` : info.runId}`,
    );
  }
  // Sleeps and event waits (docs/waits.md), as the timeline folds them: approvals are listed above.
  for (const w of story.waits) {
    const what = w.what === undefined ? "" : ` "${printable(w.what)}"`;
    const when = w.kind === "sleep" ? ` until ${w.until}` : w.expiresAt ? ` (times out ${w.expiresAt})` : "";
    out(
      `waiting ${printable(w.stepId)} (${printable(w.toolName)}) for ${w.kind === "sleep" ? "a time" : "an event"}${what}${when}: ${printable(w.deliver)}`,
    );
  }
}

/** `loom show <stepId>` of a call that waits for approval: what it would run with, since when. */
function printWaiting(io: CliIo, p: PendingApproval, json: boolean): void {
  if (json) {
    println(io.stdout, JSON.stringify({ ...p, status: "waiting-for-approval" }, null, 2));
    return;
  }
  println(io.stdout, `step    ${printable(p.stepId)}`);
  println(io.stdout, `run     ${printable(p.runId)}`);
  println(
    io.stdout,
    `tool    ${printable(p.toolName)}: waiting for approval since ${p.requestedAt}${p.expiresAt ? `, declined at ${p.expiresAt} unless approved` : ""}`,
  );
  println(io.stdout, `digest  ${p.inputDigest ?? "null"} (of the input)`);
  println(io.stdout, "input:");
  println(io.stdout, JSON.stringify(p.input, null, 2) ?? "undefined");
  println(
    io.stdout,
    `approve with: loom approve '${printable(p.stepId)}' --run ${printable(p.runId)}   deny: loom deny … [--reason <text>]`,
  );
}

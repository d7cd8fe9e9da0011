import { type Journal, sessionRuns } from "../../index.ts";
import { runIdProblem } from "../../journal.ts";
import { activityText, type ResumeCommand, statusLabel, stoppedOrNext } from "../../read/activity.ts";
import type { RunInfo } from "../../read/runInfo.ts";
import { programSessionResume, type SessionView, sessionOfRun } from "../../read/session.ts";
import { resumeCommand } from "../activity.ts";
import { clip, count, int, printable, table } from "../format.ts";
import { CliError, type CliIo, println } from "../io.ts";
import { KNOWN_LOOPS } from "../loops.ts";

/**
 * How to resume a session's last message: `loom resume '<sessionId>'` for a loop this command
 * defines, else the call a program makes (`resumeSession(loop, { sessionId, journal })`).
 */
export const sessionResumeCommand =
  (sessionId: string): ResumeCommand =>
  (runId, loopId) =>
    loopId !== undefined && KNOWN_LOOPS.has(loopId)
      ? `loom resume '${printable(sessionId)}'`
      : programSessionResume(sessionId)(runId, loopId);

/**
 * The last message's status, with how to resume the session when its run stopped and goes on only
 * when resumed (stalled, interrupted by a budget, a wait or an approval, or answered).
 */
function sessionStatus(info: RunInfo, resume: ResumeCommand): string {
  const ended = info.status === "completed" || info.status === "cancelled" || info.status === "failed";
  const text = activityText(info, resume);
  if (ended || info.activity === "running" || text !== statusLabel(info)) return text;
  return `${text} — resume with ${resume(info.runId, info.loopId)}`;
}

/** `loom show <sessionId>`: the session's messages, each the user's text, the answer, its run and its status. */
export function printSession(io: CliIo, session: SessionView, json: boolean): void {
  const { sessionId, messages, lastRunId } = session;
  if (json) {
    const shown = messages.map(({ info, ...m }) => ({ ...m, status: statusLabel(info), run: info }));
    println(io.stdout, JSON.stringify({ sessionId, lastRunId, messages: shown }, null, 2));
    return;
  }
  const out = (line: string) => println(io.stdout, line);
  const last = messages.at(-1);
  const resume = sessionResumeCommand(sessionId);
  out(`session ${printable(sessionId)}`);
  out(`loop    ${printable(last?.info.loopId ?? "?")}`);
  if (last)
    out(`status  ${count(messages.length, "message")}; the last, ${last.runId}: ${sessionStatus(last.info, resume)}`);
  const tokens = messages.reduce((t, m) => ({ in: t.in + m.info.tokens.input, out: t.out + m.info.tokens.output }), {
    in: 0,
    out: 0,
  });
  const calls = messages.reduce((n, m) => n + m.info.iterations, 0);
  out(`tokens  ${int(tokens.in)} in, ${int(tokens.out)} out, ${count(calls, "model call")}`);
  for (const m of messages) {
    const why = m === last ? stoppedOrNext(m.info, resume) : stoppedOrNext(m.info, resumeCommand);
    const status = `${statusLabel(m.info)}, ${count(m.info.iterations, "model call")}${why ? `; ${why}` : ""}`;
    out(`message ${m.n}  ${m.runId}  ${printable(status)}`);
    out(`  user    ${m.text === undefined ? "?" : printable(clip(m.text, 200))}`);
    if (m.answer !== undefined) out(`  answer  ${printable(clip(m.answer, 200))}`);
  }
  out(`each message's run: loom show '<run>'; the session's runs: loom runs --session '${printable(sessionId)}'`);
}

/** A row of `loom runs` in tree order. */
type TreeRow = { readonly run: RunInfo; readonly depth: number };

/**
 * The rows of one session (`loom runs --session <id>`): its messages' runs and the sub-agents'
 * runs under them; an error naming the session when none is in the journal.
 */
export function sessionRows<T extends TreeRow>(rows: readonly T[], sessionId: string, path: string): T[] {
  let inSession = false;
  const out = rows.filter(({ run, depth }) => {
    if (depth === 0) inSession = sessionOfRun(run.runId)?.sessionId === sessionId;
    return inSession;
  });
  if (out.length === 0) {
    throw new CliError(
      "unknownSession",
      `no session "${printable(sessionId)}" in ${path} (no run ${printable(sessionId)}/0); \`loom runs --sessions\` lists the sessions it holds`,
    );
  }
  return out;
}

/** What `loom runs --sessions` shows of one session: its messages' runs summed, and its last message's status. */
export interface SessionRow {
  readonly sessionId: string;
  readonly loopId: string | undefined;
  readonly messages: number;
  readonly lastRunId: string;
  /** The last message's status in words (`statusLabel`), and its activity. */
  readonly status: string;
  readonly activity: RunInfo["activity"];
  /** Model calls and tokens of the messages' runs (their sub-agents' are on their own rows of `loom runs`). */
  readonly iterations: number;
  readonly tokens: { readonly input: number; readonly output: number };
  readonly startedAt: string | undefined;
  readonly updatedAt: string | undefined;
  /** Why the last message stopped, or how to resume the session. */
  readonly next: string;
}

/** The sessions among the runs (top-level runs `<sessionId>/<n>`), in the order their first message appears. */
export function sessionRowsOf(rows: readonly TreeRow[]): SessionRow[] {
  const bySession = new Map<string, RunInfo[]>();
  for (const { run, depth } of rows) {
    const of = depth === 0 ? sessionOfRun(run.runId) : undefined;
    if (of !== undefined) bySession.set(of.sessionId, [...(bySession.get(of.sessionId) ?? []), run]);
  }
  return [...bySession].map(([sessionId, runs]) => {
    const ordered = [...runs].sort((a, b) => (sessionOfRun(a.runId)?.n ?? 0) - (sessionOfRun(b.runId)?.n ?? 0));
    const last = ordered.at(-1) as RunInfo;
    return {
      sessionId,
      loopId: last.loopId,
      messages: ordered.length,
      lastRunId: last.runId,
      status: statusLabel(last),
      activity: last.activity,
      iterations: ordered.reduce((n, r) => n + r.iterations, 0),
      tokens: {
        input: ordered.reduce((n, r) => n + r.tokens.input, 0),
        output: ordered.reduce((n, r) => n + r.tokens.output, 0),
      },
      startedAt: ordered[0]?.startedAt,
      updatedAt:
        ordered
          .map((r) => r.updatedAt ?? "")
          .sort()
          .at(-1) || undefined,
      next: stoppedOrNext(last, sessionResumeCommand(sessionId)),
    };
  });
}

/** `loom runs --sessions`: one row per session. */
export function printSessionRows(io: CliIo, sessions: readonly SessionRow[], json: boolean, path: string): void {
  if (json) {
    println(io.stdout, JSON.stringify(sessions, null, 2));
    return;
  }
  if (sessions.length === 0) {
    println(io.stdout, `no sessions in ${path}`);
    return;
  }
  const rows = sessions.map((s) => [
    printable(s.sessionId),
    printable(s.loopId ?? "?"),
    int(s.messages),
    `${s.lastRunId} ${s.status}`,
    int(s.iterations),
    s.tokens.input + s.tokens.output === 0 ? "-" : `${int(s.tokens.input)}/${int(s.tokens.output)}`,
    (s.startedAt ?? "").replace("T", " ").slice(0, 19),
    (s.updatedAt ?? "").replace("T", " ").slice(0, 19),
    clip(s.next, 100),
  ]);
  const header = ["session", "loop", "messages", "last message", "model calls", "tokens in/out", "started"];
  println(io.stdout, table([...header, "last activity", "stopped"], rows, [2, 4, 5]));
}

/**
 * The run `loom resume <arg>` resumes: `arg` itself when a run has that id, else the last message's
 * run of the session `arg` (said on stderr), else `arg` (which then fails as an unknown run).
 */
export async function sessionRunToResume(io: CliIo, journal: Journal, arg: string): Promise<string> {
  if (runIdProblem(arg) !== undefined) return arg;
  if ((await journal.store.listRuns({ prefix: arg })).some((r) => r.runId === arg)) return arg;
  const last = (await sessionRuns(journal, arg)).at(-1);
  if (last === undefined) return arg;
  println(io.stderr, `session ${printable(arg)}: resuming its last message's run, ${last}`);
  return last;
}

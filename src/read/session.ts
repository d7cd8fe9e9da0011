import { type Journal, type Message, sessionRuns } from "../index.ts";
import { foldRun, hydrateArchived, recordedConversation } from "../journal.ts";
import type { ResumeCommand } from "./activity.ts";
import { printable } from "./format.ts";
import type { RunInfo } from "./runInfo.ts";
import { readRunRow } from "./runRow.ts";

/**
 * A session as `loom show <sessionId>`, `loom runs --sessions` and the viewer's session page show
 * it: its messages in order, each the user's text, the answer once its run completed, and the
 * run's row (status, model calls, tokens), read the way `loom runs` reads a run.
 */

/** One message of a session: the run `<sessionId>/<n>` that answers it. */
export interface SessionMessage {
  /** The message's index in the session (0 for the first). */
  readonly n: number;
  readonly runId: string;
  /** What the user sent: the text of the last user message of the run's input. */
  readonly text: string | undefined;
  /** The model's answer: its last text, once the run completed. */
  readonly answer?: string;
  /** The run's row, as `loom runs` shows it. */
  readonly info: RunInfo;
}

/** A session's messages, and the run of its last one (the run a resume of the session goes on with). */
export interface SessionView {
  readonly sessionId: string;
  readonly messages: readonly SessionMessage[];
  /** The last message's run: the one `loom resume <sessionId>` and `resumeSession` resume. */
  readonly lastRunId: string;
}

/**
 * A session read from the journal, or undefined when no run of the journal is a message of it.
 *
 * @example
 * const session = await readSession(journal, "chat-1");
 * session?.messages.map((m) => [m.text, m.answer, m.info.activity]); // [["tides", "…", "completed"], …]
 */
export async function readSession(journal: Journal, sessionId: string): Promise<SessionView | undefined> {
  const runs = await sessionRuns(journal, sessionId);
  const lastRunId = runs.at(-1);
  if (lastRunId === undefined) return undefined;
  const messages: SessionMessage[] = [];
  for (const [n, runId] of runs.entries()) {
    const { info } = await readRunRow(journal, runId);
    // What the run itself records (its message, then its turns): the history before it is not needed here.
    const conversation = await recordedConversation(
      journal,
      await hydrateArchived(journal, await foldRun(journal, runId)),
    );
    const answer = info.status === "completed" ? lastText(conversation) : undefined;
    messages.push({
      n,
      runId,
      text: lastUserText(conversation),
      ...(answer === undefined ? {} : { answer }),
      info,
    });
  }
  return { sessionId, messages, lastRunId };
}

/**
 * The session a run is a message of: `{ sessionId: "chat-1", n: 2 }` for `chat-1/2`, undefined for
 * a run whose id does not end in `/<n>` (a sub-agent's run ends in its parent's step id).
 *
 * @example
 * sessionOfRun("chat-1/2"); // { sessionId: "chat-1", n: 2 }
 */
export function sessionOfRun(runId: string): { readonly sessionId: string; readonly n: number } | undefined {
  const match = /^(.+)\/(0|[1-9][0-9]*)$/.exec(runId);
  if (match === null) return undefined;
  return { sessionId: match[1] as string, n: Number(match[2]) };
}

/** The text of the last user message of a run's conversation: the message its session was sent. */
function lastUserText(messages: readonly Message[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message;
    if (m.role === "user") return m.content;
  }
  return undefined;
}

/** The last text an assistant message of the conversation holds. */
function lastText(messages: readonly Message[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message;
    if (m.role === "assistant" && m.content) return m.content;
  }
  return undefined;
}

/**
 * How to resume a session as a program does: `resumeSession(loop, { sessionId: "chat-1", journal })`
 * (a `ResumeCommand` for the session's last message: the session's id stands for its run).
 *
 * @example
 * activityText(last.info, programSessionResume("chat-1")); // "stalled — resume with resumeSession(loop, …)"
 */
export const programSessionResume =
  (sessionId: string): ResumeCommand =>
  () =>
    `resumeSession(loop, { sessionId: "${printable(sessionId)}", journal })`;

import { errorGuard, LoomError } from "../../core/errors.ts";
import { runsBelowPrefix, sessionMessageOf, sessionRunId } from "../../events/ids.ts";
import { redactedResumeRefusal } from "../../events/redaction/redactedResume.ts";
import type { Journal } from "../../events/spi.ts";
import type { EventStore } from "../../events/store.ts";
import type { Message } from "../../events/types.ts";
import type { RunState } from "../../projections/runState.ts";
import {
  continuedHistory,
  continuingInput,
  endedRunHistory,
  type RunHistory,
  recordedConversation,
  rememberedHistory,
} from "../base/history.ts";
import { foldRun, hydrateArchived } from "../base/readers.ts";
import { activityOfFolded } from "../control/activity.ts";

/**
 * Sessions: a conversation of many runs. Message n of session `s` is the run `s/n`,
 * started with the conversation of run `s/(n-1)` (which holds every earlier one) and the new user
 * message; it journals only the new message and names that conversation. The history is a
 * projection of those runs' journals, never a second store.
 */

/**
 * A message was sent to a session that is busy: its last message's run has not ended (a process
 * runs it, or it stalled when its process died, or it stopped and waits to be resumed), or another
 * send to it is under way. Nothing was journaled. The message says which, and what to do: wait for
 * the run, resume it with `loop.run({ runId: e.runId, journal })`, or cancel it (`cancelRun`), then
 * send again. A run that ended without completing (cancelled, failed) does not hold its session.
 *
 * @example
 * await loop.send({ sessionId, journal, message }).catch((e) => {
 *   if (isSessionBusyError(e)) return reply(409, `still answering ${e.runId}`);
 *   throw e;
 * });
 */
export class SessionBusyError extends LoomError {
  readonly sessionId: string;
  /** The run that holds the session: the last message's. */
  readonly runId: string;
  /**
   * `why` says what holds the session; `fix` what to do about it (by default: wait for the run to
   * end, or resume it).
   */
  constructor(sessionId: string, runId: string, why: string, options?: { cause?: unknown; fix?: string }) {
    const fix =
      options?.fix ??
      `Wait for run ${runId} to end (or resume it with loop.run({ runId: "${runId}", journal })), then send the message again.`;
    super(
      "sessionBusy",
      `session ${sessionId} is busy: ${why}. ${fix}`,
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    this.sessionId = sessionId;
    this.runId = runId;
  }
}

/** Whether `e` is a {@link SessionBusyError}. */
export const isSessionBusyError = errorGuard(SessionBusyError, { codes: ["sessionBusy"] });

// The run id of message n of a session, written in the id grammar; the public API takes it from here.
export { sessionRunId };

/**
 * The runs of a session, in message order (`<sessionId>/0`, `/1`, …): its sub-agents' runs and
 * other runs under the prefix are not messages and are left out.
 *
 * @example
 * await sessionRuns(journal, "chat-7"); // ["chat-7/0", "chat-7/1"]
 */
export async function sessionRuns(journal: Journal, sessionId: string): Promise<string[]> {
  const numbers: number[] = [];
  for (const run of await journal.store.listRuns({ prefix: runsBelowPrefix(sessionId) })) {
    const n = sessionMessageOf(run.runId, sessionId); // a store may ignore the prefix
    if (n !== undefined) numbers.push(n);
  }
  return numbers.sort((a, b) => a - b).map((n) => sessionRunId(sessionId, n));
}

/**
 * The conversation of one run, rebuilt from its journal: its input (a prompt as a user message;
 * for a session's message, the history it went on from and its new message), then each model
 * call's answer and the results fed back after it. The system prompt is the loop's, not the
 * conversation's: it is not included.
 *
 * @example
 * const messages = await runConversation(journal, "chat-7/1");
 */
export async function runConversation(journal: Journal, runId: string): Promise<Message[]> {
  const state = await foldRun(journal, runId);
  const before = await continuedHistory(journal, state);
  return [...before.messages, ...(await recordedConversation(journal, await hydrateArchived(journal, state)))];
}

/**
 * A session's history: the conversation of its last message whose run has ended (which went on
 * from all the earlier ones), rebuilt from the journal, so it survives any restart. Empty for a
 * new session. A message whose run was cancelled or failed is in it as far as it got (its user
 * message, and each model answer whose tool results were all recorded); a last message still
 * running, or stopped and waiting to be resumed, is not in it yet. Each message's run journals
 * only what it adds and names the history before it: the history is rebuilt by following those
 * names once, checked against their digests (`SessionHistoryError` when one cannot be read back),
 * and kept in memory, so reading it again reads only the last message's run.
 *
 * @example
 * const history = await sessionHistory(journal, "chat-7"); // [{ role: "user", … }, { role: "assistant", … }, …]
 */
export async function sessionHistory(journal: Journal, sessionId: string): Promise<Message[]> {
  const known = await unchangedLast(journal, sessionId);
  if (known !== undefined) return [...known.messages];
  const runs = await sessionRuns(journal, sessionId);
  for (let i = runs.length - 1; i >= 0; i--) {
    const runId = runs[i] as string;
    const state = await foldRun(journal, runId);
    if ((await holdsSession(journal, runId, state)) === undefined) {
      const history = await endedRunHistory(journal, state);
      if (i === runs.length - 1) noteLast(journal, sessionId, i, state.version);
      return [...history.messages];
    }
  }
  return [];
}

// Per store, each session's last message whose run had ended when this process last read it: its
// number and version. While no message came after it and its journal did not move, its history is
// the session's, read from memory: reading it again costs two short reads, not the session's runs.
const lastEnded = new WeakMap<EventStore, Map<string, { readonly n: number; readonly version: number }>>();

function noteLast(journal: Journal, sessionId: string, n: number, version: number): void {
  let kept = lastEnded.get(journal.store);
  if (kept === undefined) lastEnded.set(journal.store, (kept = new Map()));
  kept.delete(sessionId);
  kept.set(sessionId, { n, version });
  if (kept.size > 1024) kept.delete(kept.keys().next().value as string);
}

/** The history of a session's last message, when this process read it and nothing has moved since. */
async function unchangedLast(journal: Journal, sessionId: string): Promise<RunHistory | undefined> {
  const last = lastEnded.get(journal.store)?.get(sessionId);
  if (last === undefined) return undefined;
  const runId = sessionRunId(sessionId, last.n);
  const history = rememberedHistory(journal.store, runId);
  if (history === undefined) return undefined;
  const [tail, next] = await Promise.all([
    journal.store.read(runId, { from: last.version }),
    journal.store.read(sessionRunId(sessionId, last.n + 1), { from: 1 }),
  ]);
  return tail.length === 1 && tail[0]?.seq === last.version && next.length === 0 ? history : undefined;
}

/** What the next message of a session starts: its run id, and its input (the history and the message). */
export interface SessionTurn {
  readonly runId: string;
  readonly input: readonly Message[];
}

/**
 * The run the next message of a session starts, on the history as it stands (`sessionHistory`),
 * or `SessionBusyError` when the last message's run has not ended: it runs, it stalled, or it
 * stopped and waits to be resumed. A last run that was cancelled or failed, or that can never be
 * resumed because its journal was redacted, has ended its message: the next one goes on from
 * what it recorded. `loop.send` uses it; call it yourself to start the run another way
 * (`loop.stream({ ...turn, journal })`). Pass `turn.input` as it is: the run then journals only the
 * new message and names the history (a copy of the array is journaled whole, as any input is).
 *
 * @example
 * const turn = await nextSessionTurn(journal, "chat-7", "And tomorrow?");
 * const stream = loop.stream({ ...turn, journal });
 */
export async function nextSessionTurn(
  journal: Journal,
  sessionId: string,
  message: string | Message,
): Promise<SessionTurn> {
  const runs = await sessionRuns(journal, sessionId);
  const last = runs.at(-1);
  const added: Message = typeof message === "string" ? { role: "user", content: message } : message;
  const runId = sessionRunId(sessionId, runs.length);
  if (last === undefined) return { runId, input: [added] };
  const state = await foldRun(journal, last);
  const held = await holdsSession(journal, last, state);
  if (held !== undefined) throw new SessionBusyError(sessionId, last, held.why, { fix: held.fix });
  // The run journals `added` and names the history, which it was started with: not a copy of it.
  return { runId, input: continuingInput(last, state.version, await endedRunHistory(journal, state), added) };
}

/**
 * Why a message's run still holds its session, and what to do, or undefined once it has ended:
 * completed, cancelled, failed, or redacted and not running (such a run can never be resumed).
 */
async function holdsSession(
  journal: Journal,
  runId: string,
  state: RunState,
): Promise<{ readonly why: string; readonly fix: string } | undefined> {
  if (state.status === "completed" || state.status === "cancelled" || state.status === "failed") return undefined;
  const { activity } = await activityOfFolded(journal, runId, state, undefined);
  if (activity === "running") {
    return {
      why: `the run of its last message, ${runId}, is running`,
      fix: `Wait for it to end (or cancel it: cancelRun(journal, "${runId}", { reason })), then send the message again.`,
    };
  }
  // A redacted run whose originals were not kept (or were forgotten) can never be resumed: it ended.
  if (state.redacted !== undefined && (await redactedResumeRefusal(journal, state)) !== undefined) return undefined;
  const resume = `Resume it with loop.run({ runId: "${runId}", journal }), or cancel it (cancelRun(journal, "${runId}", { reason })) to go on without it; then send the message again.`;
  if (activity === "stalled") {
    const why = `the run of its last message, ${runId}, stalled: its process stopped before the run ended, and nothing runs it now`;
    return { why, fix: resume };
  }
  const reason = state.interruption?.reason;
  const stopped =
    reason === "approval-pending"
      ? "waits for an approval"
      : reason === "waiting"
        ? "waits for a time or an event (listWaits says which)"
        : `stopped (${reason ?? activity}) and waits to be resumed`;
  return { why: `the run of its last message, ${runId}, ${stopped}`, fix: resume };
}

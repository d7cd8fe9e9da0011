import { errorGuard, LoomError } from "../../core/errors.ts";
import { runsBelowPrefix, sessionMessageOf, sessionRunId, toolStepId } from "../../events/ids.ts";
import { redactedResumeRefusal } from "../../events/redaction/redactedResume.ts";
import type { Journal } from "../../events/spi.ts";
import type { Message, ToolCall } from "../../events/types.ts";
import { type RunState, responseAt } from "../../projections/runState.ts";
import { assistantMessage, fedFromState, resolveClaimCheck, toolResultMessage } from "../base/conversation.ts";
import { foldRun, hydrateArchived } from "../base/readers.ts";
import { activityOfFolded } from "../control/activity.ts";

/**
 * Sessions (DESIGN §8): a conversation of many runs. Message n of session `s` is the run `s/n`,
 * started with the conversation of run `s/(n-1)` (which holds every earlier one) and the new user
 * message. The history is a projection of those runs' journals, never a second store.
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
 * The conversation of one run, rebuilt from its journal: its input (a prompt as a user message),
 * then each model call's answer and the results fed back after it. The system prompt is the
 * loop's, not the conversation's: it is not included.
 *
 * @example
 * const messages = await runConversation(journal, "chat-7/1");
 */
export async function runConversation(journal: Journal, runId: string): Promise<Message[]> {
  const state = await hydrateArchived(journal, await foldRun(journal, runId));
  return conversationOfState(journal, state);
}

/**
 * A session's history: the conversation of its last message whose run has ended (which was
 * started with all the earlier ones), rebuilt from the journal, so it survives any restart. Empty
 * for a new session. A message whose run was cancelled or failed is in it as far as it got (its
 * user message, and each model answer whose tool results were all recorded); a last message
 * still running, or stopped and waiting to be resumed, is not in it yet.
 *
 * @example
 * const history = await sessionHistory(journal, "chat-7"); // [{ role: "user", … }, { role: "assistant", … }, …]
 */
export async function sessionHistory(journal: Journal, sessionId: string): Promise<Message[]> {
  const runs = await sessionRuns(journal, sessionId);
  for (let i = runs.length - 1; i >= 0; i--) {
    const runId = runs[i] as string;
    const state = await foldRun(journal, runId);
    if ((await holdsSession(journal, runId, state)) === undefined) return messageHistory(journal, state);
  }
  return [];
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
 * (`loop.stream({ ...turn, journal })`).
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
  let history: Message[] = [];
  if (last !== undefined) {
    const state = await foldRun(journal, last);
    const held = await holdsSession(journal, last, state);
    if (held !== undefined) throw new SessionBusyError(sessionId, last, held.why, { fix: held.fix });
    history = await messageHistory(journal, state);
  }
  const added: Message = typeof message === "string" ? { role: "user", content: message } : message;
  return { runId: sessionRunId(sessionId, runs.length), input: [...history, added] };
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

/**
 * The conversation a message's ended run leaves to the next message: all of it for a completed
 * run; for one cancelled or failed mid-turn, up to its last model answer whose tool results were
 * all recorded (a model is never sent a call without its result).
 */
async function messageHistory(journal: Journal, state: RunState): Promise<Message[]> {
  const messages = await conversationOfState(journal, await hydrateArchived(journal, state));
  return state.status === "completed" ? messages : wholeTurns(messages);
}

/** `messages` without a last assistant message whose tool calls are not all followed by their results. */
function wholeTurns(messages: Message[]): Message[] {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message;
    if (m.role !== "assistant") continue;
    return messages.length - 1 - i < m.toolCalls.length ? messages.slice(0, i) : messages;
  }
  return messages;
}

/** The conversation a folded run records (see {@link runConversation}). */
async function conversationOfState(journal: Journal, state: RunState): Promise<Message[]> {
  const input = state.input;
  const messages: Message[] =
    typeof input === "string" ? [{ role: "user", content: input }] : [...((input ?? []) as readonly Message[])];
  const loopId = state.loopId ?? "";
  for (let turn = 0; turn < state.turns; turn++) {
    const response = responseAt(state, turn);
    if (response === undefined) break;
    messages.push(assistantMessage(response));
    for (let index = 0; index < response.toolCalls.length; index++) {
      const stepId = toolStepId(loopId, turn, index);
      const fed = await fedFromState(state, stepId, (id, envelope) =>
        resolveClaimCheck(envelope, journal.blobs, `run ${state.runId} step ${id}`),
      );
      if (fed === undefined) break; // the turn's results are not all in (a run that stopped mid-turn)
      messages.push(toolResultMessage(response.toolCalls[index] as ToolCall, fed));
    }
  }
  return messages;
}

import { LoomError } from "../../core/errors.ts";
import { toolStepId } from "../../events/ids.ts";
import { redactedResumeRefusal } from "../../events/redactedResume.ts";
import type { Journal } from "../../events/spi.ts";
import type { Message, ToolCall } from "../../events/types.ts";
import { type RunState, responseAt } from "../../projections/runState.ts";
import { assistantMessage, fedFromState, resolveClaimCheck, toolResultMessage } from "../base/conversation.ts";
import { foldRun, hydrateArchived } from "../base/readers.ts";

/**
 * Sessions (DESIGN §8): a conversation of many runs. Message n of session `s` is the run `s/n`,
 * started with the conversation of run `s/(n-1)` (which holds every earlier one) and the new user
 * message. The history is a projection of those runs' journals, never a second store.
 */

/**
 * A message was sent to a session that is busy: its last message's run has not completed (it is
 * running, here or in another process, or it stopped and waits to be resumed), or another send to
 * it is under way. Nothing was journaled. Wait for the run, or resume it with
 * `loop.run({ runId: e.runId, journal })`, then send again.
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
  constructor(
    sessionId: string,
    runId: string,
    why: string,
    options?: {
      cause?: unknown /** Why the run cannot be resumed, when it cannot (then no resume is advised). */;
      unresumable?: string;
    },
  ) {
    super(
      "sessionBusy",
      options?.unresumable === undefined
        ? `session ${sessionId} is busy: ${why}. Wait for run ${runId} to complete (or resume it with loop.run({ runId: "${runId}", journal })), then send the message again.`
        : `session ${sessionId} is busy: ${why}, and run ${runId} ${options.unresumable}.`,
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    this.sessionId = sessionId;
    this.runId = runId;
  }
}

/** Whether `e` is a {@link SessionBusyError}. */
export const isSessionBusyError = (e: unknown): e is SessionBusyError => e instanceof SessionBusyError;

/**
 * The run id of message `n` (0-based) of a session: `<sessionId>/<n>`.
 *
 * @example
 * sessionRunId("chat-7", 2); // "chat-7/2"
 */
export const sessionRunId = (sessionId: string, n: number): string => `${sessionId}/${n}`;

/**
 * The runs of a session, in message order (`<sessionId>/0`, `/1`, …): its sub-agents' runs and
 * other runs under the prefix are not messages and are left out.
 *
 * @example
 * await sessionRuns(journal, "chat-7"); // ["chat-7/0", "chat-7/1"]
 */
export async function sessionRuns(journal: Journal, sessionId: string): Promise<string[]> {
  const prefix = `${sessionId}/`;
  const numbers: number[] = [];
  for (const run of await journal.store.listRuns({ prefix })) {
    if (!run.runId.startsWith(prefix)) continue;
    const rest = run.runId.slice(prefix.length);
    if (/^(0|[1-9][0-9]*)$/.test(rest)) numbers.push(Number(rest));
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
 * A session's history: the conversation of its last completed message (which was started with
 * all the earlier ones), rebuilt from the journal, so it survives any restart. Empty for a new
 * session. A last message still running or stopped is not in it yet.
 *
 * @example
 * const history = await sessionHistory(journal, "chat-7"); // [{ role: "user", … }, { role: "assistant", … }, …]
 */
export async function sessionHistory(journal: Journal, sessionId: string): Promise<Message[]> {
  const runs = await sessionRuns(journal, sessionId);
  for (let i = runs.length - 1; i >= 0; i--) {
    const state = await foldRun(journal, runs[i] as string);
    if (state.status === "completed") return conversationOfState(journal, await hydrateArchived(journal, state));
  }
  return [];
}

/** What the next message of a session starts: its run id, and its input (the history and the message). */
export interface SessionTurn {
  readonly runId: string;
  readonly input: readonly Message[];
}

/**
 * The run the next message of a session starts, or `SessionBusyError` when the last message's run
 * has not completed. `loop.send` uses it; call it yourself to start the run another way
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
    if (state.status !== "completed") {
      const unresumable = await redactedResumeRefusal(journal, state);
      throw new SessionBusyError(
        sessionId,
        last,
        `the run of its last message is ${state.status}`,
        unresumable === undefined ? undefined : { unresumable },
      );
    }
    history = await conversationOfState(journal, await hydrateArchived(journal, state));
  }
  const added: Message = typeof message === "string" ? { role: "user", content: message } : message;
  return { runId: sessionRunId(sessionId, runs.length), input: [...history, added] };
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

import { errorGuard, LoomError } from "../../core/errors.ts";
import { checkRunId, sessionRunId } from "../../events/ids.ts";
import type { ToolCallLogMode } from "../../projections/types.ts";
import type { AgentLoop, RunRequest, SessionReply } from "./agentLoop.ts";
import { sessionRuns } from "./sessions.ts";

/**
 * No run of the journal is a message of the session: nothing was sent to it (check the id, or the
 * journal), so there is nothing to resume. Start it with `loop.send({ sessionId, journal, message })`.
 *
 * @example
 * await resumeSession(loop, { sessionId, journal }).catch((e) => {
 *   if (isUnknownSessionError(e)) return reply(404, e.message);
 *   throw e;
 * });
 */
export class UnknownSessionError extends LoomError {
  readonly sessionId: string;
  constructor(sessionId: string) {
    super(
      "unknownSession",
      `session ${sessionId} has no message in this journal (no run ${sessionRunId(sessionId, 0)}): check the session id and the journal, or start the session with loop.send({ sessionId: "${sessionId}", journal, message })`,
    );
    this.sessionId = sessionId;
  }
}

/** Whether `e` is an {@link UnknownSessionError}. */
export const isUnknownSessionError = errorGuard(UnknownSessionError);

/** One `resumeSession(...)`: what `loop.run` takes, the session standing for the run id. */
export interface ResumeSessionRequest extends Omit<RunRequest, "runId" | "input"> {
  /** The session: its last message's run is the one resumed. */
  readonly sessionId: string;
}

/**
 * Resumes a session by its id: runs `loop.run` on the run of its last message (`<sessionId>/<n>`),
 * so a program need not work out which run that is. A run that stalled, stopped for an approval,
 * a wait or a budget goes on where it stopped; one that completed gives its answer from the journal
 * without calling the model. Approvals, a raised budget and the other options of `loop.run` are
 * passed on (a message sent with a session's budget counts the earlier messages again on a resume,
 * from what its run recorded). Resolves to the run's value and
 * its run id; rejects with `UnknownSessionError` when nothing was sent to the session, and as
 * `loop.run` does otherwise (`RunBusyError` while a process runs it, `AgentInterruptedError` when
 * it stops again).
 *
 * @example
 * const reply = await resumeSession(loop, { sessionId: "chat-7", journal });
 * reply.runId; // "chat-7/3": the message it answered
 */
export async function resumeSession<M extends ToolCallLogMode | undefined>(
  loop: AgentLoop<M>,
  request: ResumeSessionRequest,
): Promise<SessionReply<M>> {
  const { sessionId, ...rest } = request;
  checkRunId(sessionId, "resumeSession");
  const runId = (await sessionRuns(request.journal, sessionId)).at(-1);
  if (runId === undefined) throw new UnknownSessionError(sessionId);
  const out = await loop.run({ ...rest, runId });
  return { ...out, runId };
}

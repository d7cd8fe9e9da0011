/**
 * Session-wide approvals: a person approved a call with `scope: "session"`, so the later messages
 * of its session do not ask again for that tool. The scope is journaled once, in the run where it
 * was given; a later message's run reads it from the earlier runs of its session.
 */
import { approvalId, DECISION_SOURCES, sessionRunId } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import type { ApprovalChoice } from "../base/callResult.ts";

/** Where a session-wide approval of a tool was given: the run and its decision id. */
export interface SessionScope {
  readonly runId: string;
  readonly decisionId: string;
}

/** A session message's run id, `<sessionId>/<n>`. */
const SESSION_RUN = /^(.+)\/(0|[1-9]\d*)$/;

/**
 * The session-wide approvals given in the earlier messages' runs of `runId`'s session, by tool
 * name (the first given for each), or undefined for a run that is no session message's or the
 * first one.
 *
 * @example
 * (await sessionScopesBefore(journal, "chat-7/3"))?.get("search"); // { runId: "chat-7/1", decisionId: "…:approval" }
 */
export async function sessionScopesBefore(
  journal: Journal,
  runId: string,
): Promise<ReadonlyMap<string, SessionScope> | undefined> {
  const m = SESSION_RUN.exec(runId);
  if (m === null) return undefined;
  const sessionId = m[1] as string;
  const n = Number(m[2]);
  if (n === 0) return undefined;
  const scopes = new Map<string, SessionScope>();
  for (let k = 0; k < n; k++) {
    const earlier = sessionRunId(sessionId, k);
    for (const entry of await readJournal(journal, earlier)) {
      if (entry.type !== "decision.recorded" || entry.data.source !== DECISION_SOURCES.approval) continue;
      const choice = entry.data.choice as ApprovalChoice | undefined;
      const tool = choice?.toolName;
      if (choice?.approved !== true || choice.scope !== "session" || tool === undefined || scopes.has(tool)) continue;
      if (!entry.data.decisionId.endsWith(approvalId(""))) continue; // an approval decision id, `<stepId>:approval`
      scopes.set(tool, { runId: earlier, decisionId: entry.data.decisionId });
    }
  }
  return scopes;
}

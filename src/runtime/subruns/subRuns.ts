/**
 * Sub-agent runs (`agentTool`) as the rest of the runtime sees them: the child run id of a call,
 * the parent of a child run, and a child's pending approvals carried up to its parent's
 * interruption. The runtime's files call these in one line each, so the loop's own files stay
 * about the loop.
 */
import { errorGuard, LoomError } from "../../core/errors.ts";
import { childRunIdSplits, runsBelowPrefix } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import type { InterruptedAgentRun } from "../../projections/types.ts";
import type { RunContext } from "./runContext.ts";

/** A child run's place: the parent run and the parent's tool call (its step) that runs it. */
export interface SubRunParent {
  readonly runId: string;
  readonly stepId: string;
}

/**
 * The parent of run `runId` when it is a sub-agent's run: `runId` is `<parent>/<stepId>`, the
 * step a tool call id of a run the journal holds, whose frame for that step is journaled. Else
 * undefined (a top-level run, even one whose id holds a `/`).
 *
 * @example
 * await parentRunOf(journal, "trip/planner#turn:0:tool:0"); // { runId: "trip", stepId: "planner#turn:0:tool:0" }
 */
export async function parentRunOf(journal: Journal, runId: string): Promise<SubRunParent | undefined> {
  for (const { runId: parent, stepId } of childRunIdSplits(runId)) {
    const entries = await readJournal(journal, parent).catch(() => []);
    if (entries.some((e) => e.type === "frame.started" && e.data.frameId === stepId)) return { runId: parent, stepId };
  }
  return undefined;
}

/**
 * A sub-agent's run stopped for a pending approval: the parent's call waits with it (the call's
 * frame stays started, so resuming the parent runs the call again, which resumes the child). It
 * never reaches the parent's model: the runtime turns it into the call's `pending` state.
 *
 * @example
 * if (isSubAgentPendingError(e)) console.log(e.childRunId, e.child.pendingApprovals);
 */
export class SubAgentPendingError extends LoomError {
  readonly childRunId: string;
  readonly child: InterruptedAgentRun;
  /** Not retried: the child waits for a person, not for time. */
  readonly isRetryable = false;
  constructor(child: InterruptedAgentRun) {
    super(
      "subAgentPending",
      `the sub-agent run ${child.runId} waits for approval of ${child.pendingApprovals.map((p) => p.stepId).join(", ")}; answer with recordApproval(journal, "${child.runId}", stepId, …), then resume the parent`,
    );
    this.childRunId = child.runId;
    this.child = child;
  }
}

/** Whether `e` is a {@link SubAgentPendingError}. */
export const isSubAgentPendingError = errorGuard(SubAgentPendingError, { codes: ["subAgentPending"] });

/**
 * Whether a tool call's failure is a sub-agent waiting for an approval; if so, keeps the child's
 * pending approvals in the parent's run context for its interruption (`RunContext.waitingBelow`).
 * Called by the tool-call runtime (`toolActors.ts`) where a tool gave up: a waiting child makes
 * the call pending instead of failed, its frame left started.
 */
export function subRunWaits(run: RunContext, stepId: string, thrown: unknown): boolean {
  if (!isSubAgentPendingError(thrown)) return false;
  const childId = thrown.childRunId;
  run.childWaits(
    stepId,
    thrown.child.pendingApprovals.map((p) => ({ ...p, runId: p.runId ?? childId })),
  );
  return true;
}

/** Entry types that end a run: nothing is appended after them. */
const ENDED = new Set(["run.completed", "run.failed", "run.cancelled"]);

/**
 * The sub-agent runs below `runId` (children, theirs, …) that have not ended, parents before
 * their children: what cancelling `runId` cancels with it. A run counts when its chain of
 * parents (`parentRunOf`) leads to `runId`.
 *
 * @example
 * await openSubRunsOf(journal, "trip"); // ["trip/planner#turn:0:tool:0", "trip/planner#turn:0:tool:0/researcher#turn:0:tool:0"]
 */
export async function openSubRunsOf(journal: Journal, runId: string): Promise<string[]> {
  const prefix = runsBelowPrefix(runId);
  // Looked up by prefix where the store can (a range of its run ids); a store that lists every run is filtered here.
  const candidates = (await journal.store.listRuns({ prefix })).filter(
    (r) => r.runId.startsWith(prefix) && !ENDED.has(r.lastType),
  );
  const below: string[] = [];
  for (const { runId: id } of candidates) {
    let at: string | undefined = id;
    while (at !== undefined && at !== runId) at = (await parentRunOf(journal, at))?.runId;
    if (at === runId) below.push(id);
  }
  return below.sort((a, b) => a.length - b.length || (a < b ? -1 : 1));
}

/**
 * A sub-agent's run was cancelled (`cancelRun` on it, not on its parent): it will never go on, so
 * the parent's call fails and its model is told, instead of running the child again.
 *
 * @example
 * if (isSubAgentCancelledError(e)) console.log(`${e.childRunId} was cancelled: ${e.reason}`);
 */
export class SubAgentCancelledError extends LoomError {
  readonly childRunId: string;
  /** Why, as the canceller said. */
  readonly reason: string;
  /** Not retried: a cancelled run is never resumed. */
  readonly isRetryable = false;
  constructor(childRunId: string, reason: string) {
    super(
      "subAgentCancelled",
      `the sub-agent run ${childRunId} was cancelled (${reason}) and will not go on; answer without it, or ask for it again (a new call is a new sub-agent run)`,
    );
    this.childRunId = childRunId;
    this.reason = reason;
  }
}

/** Whether `e` is a {@link SubAgentCancelledError}. */
export const isSubAgentCancelledError = errorGuard(SubAgentCancelledError, { codes: ["subAgentCancelled"] });

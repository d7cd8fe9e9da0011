/**
 * Answers to a sub-agent's pending approvals given to its parent's `loop.run({ approvals })`:
 * resolved once where the answers are given (a step id that waits in one child is qualified with
 * that child's run id), offered to the run's `agentTool` calls, which hand each child the answers
 * below it, and looked up by the child's approval actor. The runtime's files call these in one
 * line each.
 */
import { LoomError } from "../core/errors.ts";
import type { Journal } from "../events/spi.ts";
import { listPendingApprovals } from "./control/approvals.ts";
import { childRunId } from "./subRuns.ts";

/** Answers to pending approvals, by step id or by `<runId>/<stepId>` (see `RunOptions.approvals`). */
export type ApprovalAnswers = Readonly<Record<string, boolean>>;

/**
 * A plain step id in `run({ approvals })` names a call that waits in more than one run of the
 * chain (two sub-agents of the same loop, or a sub-agent with the parent's own loop id), so
 * nothing is answered. Key each answer by `<runId>/<stepId>` instead, the run as
 * `e.run.pendingApprovals[i].runId` (or `listPendingApprovals`) names it.
 *
 * @example
 * const answers = Object.fromEntries(e.run.pendingApprovals.map((p) => [approvalKey(p.runId ?? runId, p.stepId), true]));
 * await loop.run({ runId, journal, approvals: answers });
 */
export class AmbiguousApprovalError extends LoomError {
  readonly runId: string;
  readonly stepId: string;
  /** The runs where a call `stepId` waits. */
  readonly runIds: readonly string[];
  constructor(runId: string, stepId: string, runIds: readonly string[]) {
    super(
      "ambiguousApproval",
      `run ${runId}: the approval answer for ${stepId} is ambiguous, a call ${stepId} waits in ${runIds.join(" and ")}; key it by run, approvals: { "${runIds[0]}/${stepId}": … }`,
    );
    this.runId = runId;
    this.stepId = stepId;
    this.runIds = runIds;
  }
}

/** Whether `e` is an {@link AmbiguousApprovalError}. */
export const isAmbiguousApprovalError = (e: unknown): e is AmbiguousApprovalError =>
  e instanceof AmbiguousApprovalError;

/**
 * The key of an answer in `run({ approvals })` for the call `stepId` waiting in run `runId`
 * (the parent's own run, or a sub-agent's at any depth): `<runId>/<stepId>`. Never ambiguous.
 *
 * @example
 * await planner.run({ runId: "p", journal, approvals: { [approvalKey(p.runId, p.stepId)]: true } });
 */
export const approvalKey = (runId: string, stepId: string): string => childRunId(runId, stepId);

/**
 * The request with its plain step-id answers resolved against the calls waiting in its chain: one
 * waiting in a sub-agent's run is keyed by that run; one waiting in the run itself, or nowhere,
 * is kept. Throws {@link AmbiguousApprovalError} when a step id waits in more than one run.
 */
export async function resolveApprovals<R extends { runId: string; journal: Journal; approvals?: ApprovalAnswers }>(
  request: R,
): Promise<R> {
  const { approvals, runId } = request;
  if (approvals === undefined) return request;
  const own = `${runId}/`;
  const plain = Object.keys(approvals).filter((k) => !k.startsWith(own));
  if (plain.length === 0) return request;
  const pending = await listPendingApprovals(request.journal, { runId });
  if (!pending.some((p) => p.runId !== runId)) return request; // no sub-agent waits: all are the run's own
  const resolved: Record<string, boolean> = { ...approvals };
  for (const stepId of plain) {
    const where = [...new Set(pending.filter((p) => p.stepId === stepId).map((p) => p.runId))];
    if (where.length > 1) throw new AmbiguousApprovalError(runId, stepId, where);
    const [at] = where;
    if (at === undefined || at === runId) continue;
    delete resolved[stepId];
    resolved[approvalKey(at, stepId)] = approvals[stepId] as boolean;
  }
  return { ...request, approvals: resolved };
}

/** The answers each run going in this process was given, by journal store and run id. */
const offered = new WeakMap<object, Map<string, ApprovalAnswers>>();

/**
 * Offers a run's answers to its `agentTool` calls while it runs; the returned function takes
 * them back. Called where the run is held (`agentLoop.ts`).
 */
export function offerApprovals(journal: Journal, runId: string, approvals: ApprovalAnswers | undefined): () => void {
  if (approvals === undefined) return () => {};
  let byRun = offered.get(journal.store);
  if (byRun === undefined) offered.set(journal.store, (byRun = new Map()));
  byRun.set(runId, approvals);
  return () => {
    if (byRun.get(runId) === approvals) byRun.delete(runId);
  };
}

/**
 * The answers meant for the sub-agent run `childId` of the run `runId` and the runs below it
 * (those keyed `<childId>/…`), or undefined when there are none. Called by `agentTool`.
 */
export function approvalsBelow(journal: Journal, runId: string, childId: string): ApprovalAnswers | undefined {
  const given = offered.get(journal.store)?.get(runId);
  if (given === undefined) return undefined;
  const prefix = `${childId}/`;
  const below = Object.entries(given).filter(([k]) => k.startsWith(prefix));
  return below.length === 0 ? undefined : Object.fromEntries(below);
}

/**
 * The answer given for the call `stepId` of run `runId`: keyed by its step id, or by
 * `<runId>/<stepId>`. Called by the approval actor (`approvalActor.ts`).
 */
export const answerGiven = (approvals: ApprovalAnswers | undefined, runId: string, stepId: string) =>
  approvals?.[stepId] ?? approvals?.[approvalKey(runId, stepId)];

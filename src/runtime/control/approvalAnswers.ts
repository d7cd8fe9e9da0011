/**
 * Answers to pending approvals given to `loop.run({ approvals })`, resolved once where they are
 * given: a plain step id that waits in one sub-agent's run is qualified with that run's id, one
 * naming no waiting call is refused. The run then hands them down (`subruns/subRunApprovals.ts`).
 */
import { errorGuard, LoomError } from "../../core/errors.ts";
import { approvalId, isRunBelow, runsBelowPrefix } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import { foldEntries, type RunState } from "../../projections/runState.ts";
import { checkApprovedInput } from "../base/approvedInput.ts";
import type { Tool } from "../base/config.ts";
import { type ApprovalAnswers, answerGiven, approvalKey } from "../subruns/subRunApprovals.ts";
import { listPendingApprovals, type PendingApproval } from "./approvals.ts";
import { ApprovalRefusedError } from "./errors.ts";

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
export const isAmbiguousApprovalError = errorGuard(AmbiguousApprovalError, { codes: ["ambiguousApproval"] });

/**
 * The request with its plain step-id answers resolved against the calls waiting in its chain: one
 * waiting in a sub-agent's run is keyed by that run; one waiting in the run itself, or nowhere,
 * is kept. Throws {@link AmbiguousApprovalError} when a step id waits in more than one run, and
 * {@link ApprovalInputError} when an input approved in place of the model's, for a call of the run
 * itself, is refused by its tool among `tools` (before anything is journaled).
 */
export async function resolveApprovals<R extends { runId: string; journal: Journal; approvals?: ApprovalAnswers }>(
  request: R,
  tools: Readonly<Record<string, Tool>> = {},
): Promise<R> {
  const { approvals, runId, journal } = request;
  if (approvals === undefined || Object.keys(approvals).length === 0) return request;
  const state = foldEntries(await readJournal(journal, runId));
  // Answers are for the calls a run waits for: another run is given none to resolve or check.
  if (state.status !== "interrupted" || state.interruption?.reason !== "approval-pending") return request;
  const pending = await listPendingApprovals(journal, { runId });
  await refuseUnknownSteps(journal, runId, state, approvals, pending);
  await checkEditedInputs(runId, approvals, pending, tools);
  const own = runsBelowPrefix(runId);
  const plain = Object.keys(approvals).filter((k) => !k.startsWith(own));
  if (plain.length === 0) return request;
  if (!pending.some((p) => p.runId !== runId)) return request; // no sub-agent waits: all are the run's own
  const resolved: Record<string, ApprovalAnswers[string]> = { ...approvals };
  for (const stepId of plain) {
    const where = [...new Set(pending.filter((p) => p.stepId === stepId).map((p) => p.runId))];
    if (where.length > 1) throw new AmbiguousApprovalError(runId, stepId, where);
    const [at] = where;
    if (at === undefined || at === runId) continue;
    delete resolved[stepId];
    resolved[approvalKey(at, stepId)] = approvals[stepId] as ApprovalAnswers[string];
  }
  return { ...request, approvals: resolved };
}

/** Checks each input approved in place of the model's for a call waiting in the run itself, against its tool. */
async function checkEditedInputs(
  runId: string,
  approvals: ApprovalAnswers,
  pending: readonly PendingApproval[],
  tools: Readonly<Record<string, Tool>>,
): Promise<void> {
  for (const p of pending) {
    if (p.runId !== runId) continue; // a sub-agent's call: checked by its own run, against its own tools
    const given = answerGiven(approvals, runId, p.stepId);
    if (typeof given !== "object" || !given.approved || given.input === undefined) continue;
    const tool = Object.hasOwn(tools, p.toolName) ? tools[p.toolName] : undefined;
    await checkApprovedInput({ runId, stepId: p.stepId, toolName: p.toolName }, tool, given.input);
  }
}

/**
 * Refuses (`ApprovalRefusedError`, `approvalUnknownStep`) an answer whose key names no call that
 * waits in the run's chain and no call of the run (or of a sub-agent's run, keyed by it) that was
 * asked about before: a typo would otherwise be ignored and the run stop again, waiting.
 */
async function refuseUnknownSteps(
  journal: Journal,
  runId: string,
  state: RunState,
  approvals: ApprovalAnswers,
  pending: readonly PendingApproval[],
): Promise<void> {
  const waiting = new Set(pending.flatMap((p) => [p.stepId, approvalKey(p.runId, p.stepId)]));
  for (const key of Object.keys(approvals)) {
    if (waiting.has(key) || wasAsked(state, key)) continue;
    const cut = key.lastIndexOf("/");
    const at = cut < 0 ? undefined : key.slice(0, cut);
    if (at === runId && wasAsked(state, key.slice(cut + 1))) continue;
    if (
      at !== undefined &&
      isRunBelow(at, runId) &&
      wasAsked(foldEntries(await readJournal(journal, at)), key.slice(cut + 1))
    )
      continue;
    const list = [...new Set(pending.map((p) => (p.runId === runId ? p.stepId : approvalKey(p.runId, p.stepId))))];
    throw new ApprovalRefusedError(
      "approvalUnknownStep",
      runId,
      key,
      `run ${runId}: the approval answer for ${key} names no call that waits for an approval (${list.length > 0 ? `waiting: ${list.join(", ")}` : "none waits"}); key each answer by a waiting call's step id (e.run.pendingApprovals, listPendingApprovals, loom approvals)`,
    );
  }
}

/** The run asked about its call `stepId` before (or decided it): an answer given again is harmless. */
const wasAsked = (state: RunState, stepId: string): boolean =>
  state.approvalRequests[stepId] !== undefined || state.decisions[approvalId(stepId)] !== undefined;

/**
 * Answers to a sub-agent's pending approvals given to its parent's `loop.run({ approvals })`, as
 * a run hands them down: kept in the run's context (`RunContext`), from which its `agentTool`
 * calls hand each child the answers below it, and looked up by the child's approval actor. How
 * the answers are resolved and checked where they are given is `control/approvalAnswers.ts`.
 */
import { childRunId, runsBelowPrefix } from "../../events/ids.ts";

/** Answers to pending approvals, by step id or by `<runId>/<stepId>` (see `RunOptions.approvals`). */
export type ApprovalAnswers = Readonly<Record<string, boolean>>;

/**
 * The key of an answer in `run({ approvals })` for the call `stepId` waiting in run `runId`
 * (the parent's own run, or a sub-agent's at any depth): `<runId>/<stepId>`. Never ambiguous.
 *
 * @example
 * await planner.run({ runId: "p", journal, approvals: { [approvalKey(p.runId, p.stepId)]: true } });
 */
export const approvalKey = (runId: string, stepId: string): string => childRunId(runId, stepId);

/**
 * The answers among `given` (a run's, as `run({ approvals })` resolved them) meant for its
 * sub-agent run `childId` and the runs below it (those keyed `<childId>/…`), or undefined when
 * there are none. Called through the run's context (`RunContext.approvalsBelow`) by `agentTool`.
 */
export function answersBelow(given: ApprovalAnswers | undefined, childId: string): ApprovalAnswers | undefined {
  if (given === undefined) return undefined;
  const prefix = runsBelowPrefix(childId);
  const below = Object.entries(given).filter(([k]) => k.startsWith(prefix));
  return below.length === 0 ? undefined : Object.fromEntries(below);
}

/**
 * The answer given for the call `stepId` of run `runId`: keyed by its step id, or by
 * `<runId>/<stepId>`. Called by the approval actor (`approvalActor.ts`).
 */
export const answerGiven = (approvals: ApprovalAnswers | undefined, runId: string, stepId: string) =>
  approvals?.[stepId] ?? approvals?.[approvalKey(runId, stepId)];

/**
 * Answers to a sub-agent's pending approvals given to its parent's `loop.run({ approvals })`, as
 * a run hands them down: kept in the run's context (`RunContext`), from which its `agentTool`
 * calls hand each child the answers below it, and looked up by the child's approval actor. How
 * the answers are resolved and checked where they are given is `control/approvalAnswers.ts`.
 */
import { childRunId, runsBelowPrefix } from "../../events/ids.ts";

/**
 * An answer to a pending approval beyond yes or no (`run({ approvals: { [stepId]: reply } })`):
 * who answered and why, an input approved in place of the model's (checked against the tool's
 * `validateInput` first; the call runs with it), or a scope: `"run"` approves every later call of
 * the same tool in this run too, `"session"` in the later messages of its session as well.
 *
 * @example
 * await loop.run({ runId, journal, approvals: { [stepId]: { approved: true, input: { order: "A-17", euros: 30 }, by: "ana" } } });
 */
export interface ApprovalReply {
  readonly approved: boolean;
  readonly reason?: string;
  readonly by?: string;
  /** Approve with this input instead of the model's (edit and approve). */
  readonly input?: unknown;
  /**
   * `"run"`: approve the tool's later calls in this run too, without asking; `"session"`: and in
   * the later messages' runs of the session (`<sessionId>/<n>`). Default `"call"`.
   */
  readonly scope?: "call" | "run" | "session";
}

/** Answers to pending approvals, by step id or by `<runId>/<stepId>` (see `RunOptions.approvals`). */
export type ApprovalAnswers = Readonly<Record<string, boolean | ApprovalReply>>;

/** An answer as a reply: `true` and `false` are the plain yes and no. */
export const asReply = (answer: boolean | ApprovalReply): ApprovalReply =>
  typeof answer === "boolean" ? { approved: answer } : answer;

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

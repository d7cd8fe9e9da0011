import { fromPromise } from "xstate";
import { digestOfRecorded } from "../../core/digest.ts";
import { approvalId } from "../../events/ids.ts";
import type { ApprovalOutput, ToolCallInput } from "../../machines/toolCall.machine.ts";
import { approvalExpiry } from "../../policies/approval.ts";
import { approvalEntries } from "../base/callResult.ts";
import { answerGiven } from "../subruns/subRunApprovals.ts";
import { boundRun } from "./runBinding.ts";
import type { RunSession } from "./session.ts";
import type { ToolCalls } from "./toolActors.ts";

/**
 * The toolCall chart's `askApproval`, built once (its run found through its actor system): the
 * journaled decision if there is one (its input digest checked), else the answer given in
 * `approvals`, or by `config.approve`, journaled once; a decline (or an expired request) also
 * settles the call.
 */
export const askApproval = fromPromise<ApprovalOutput, ToolCallInput>(({ input, system }) => {
  const { session, calls } = boundRun(system);
  // An approved call passes its turn once its tool's start is journaled; any other, here.
  return approve(session, calls, input).then(
    (out) => {
      if (out.kind !== "approved") calls.passed(input);
      return out;
    },
    (error: unknown) => {
      calls.passed(input);
      throw error;
    },
  );
});

async function approve(session: RunSession, calls: ToolCalls, input: ToolCallInput): Promise<ApprovalOutput> {
  const { config, options } = session;
  const runId = options.runId;
  const { stepId, call } = input;
  const inputDigest = digestOfRecorded(call.input).digest;
  const decisionId = approvalId(stepId);
  const recorded = session.state.decisions[decisionId]?.choice as
    | { approved?: boolean; inputDigest?: string }
    | undefined;
  if (recorded) {
    if (recorded.inputDigest !== inputDigest)
      throw session.divergence(decisionId, "an approval given for another input");
    return recorded.approved ? { kind: "approved" } : { kind: "declined" };
  }
  // Expired (the tool's approvalTimeoutMs, counted from the first interruption that asked): declined,
  // whatever answer comes now, also when no process was running when it expired.
  const expiresAt = approvalExpiry(session.state.approvalRequests[stepId], session.tools[call.name]?.approvalTimeoutMs);
  const expired = expiresAt !== undefined && session.now() >= expiresAt; // the run's clock, as waits read it
  const given = expired ? false : answerGiven(options.approvals, runId, stepId);
  const answer =
    given ??
    (config.approve ? await config.approve({ runId, stepId, toolName: call.name, input: call.input }) : "pending");
  if (answer === "pending") return { kind: "pending" };
  // The answer is journaled in the call's turn (the response's call order: callOrder.ts).
  const turn = calls.turnOf(input);
  if (turn !== undefined) await turn;
  // Nothing has run on the answer yet: it is written with the next append, which for an approved
  // call is its tool's start (one append for both, in call order), else the turn's next one.
  const entries = approvalEntries(stepId, call.name, {
    approved: answer === true,
    inputDigest,
    ...(expired ? { reason: "approval-expired", expiredAt: expiresAt } : {}),
  });
  session.appender.defer(...entries);
  if (answer === true) return { kind: "approved" };
  session.setFed(stepId, { output: session.state.settled[stepId]?.result, isError: true });
  return { kind: "declined" };
}

import { fromPromise } from "xstate";
import { digestOfRecorded } from "../../core/digest.ts";
import { AgentLoopConfigError } from "../../core/errors.ts";
import { approvalId, DECISION_SOURCES } from "../../events/ids.ts";
import type { ApprovalOutput, ToolCallInput } from "../../machines/toolCall.machine.ts";
import { type ApprovalPolicyRequest, approvalExpiry, verdictAnswer } from "../../policies/approval.ts";
import { type CheckedInput, checkApprovedInput } from "../base/approvedInput.ts";
import { type ApprovalAnswer, type ApprovalChoice, approvalEntries, approvedInputOf } from "../base/callResult.ts";
import type { Tool } from "../base/config.ts";
import { answerGiven, asReply } from "../subruns/subRunApprovals.ts";
import { boundRun } from "./runBinding.ts";
import type { RunSession } from "./session.ts";
import type { ToolCalls } from "./toolActors.ts";

/**
 * The toolCall chart's `askApproval`, built once (its run found through its actor system): the
 * journaled decision if there is one (its input digest checked), else the answer given in
 * `approvals`, by an approval policy, by a run- or session-wide approval of the tool, or by `config.approve`,
 * journaled once; a decline (or an expired request) also settles the call. A call approved with
 * another input runs with it.
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
  const runId = session.options.runId;
  const { stepId, call } = input;
  const tool = Object.hasOwn(session.tools, call.name) ? session.tools[call.name] : undefined;
  const inputDigest = digestOfRecorded(call.input).digest;
  const decisionId = approvalId(stepId);
  const recorded = session.state.decisions[decisionId]?.choice as ApprovalChoice | undefined;
  if (recorded) {
    if (recorded.inputDigest !== inputDigest)
      throw session.divergence(decisionId, "an approval given for another input");
    if (!recorded.approved) return { kind: "declined" };
    const edited = approvedInputOf(recorded);
    if (edited !== undefined) await runWithApproved(calls, runId, stepId, call.name, tool, edited.input);
    return { kind: "approved" };
  }
  // Expired (the tool's approvalTimeoutMs, counted from the first interruption that asked): declined,
  // whatever answer comes now, also when no process was running when it expired.
  const expiresAt = approvalExpiry(session.state.approvalRequests[stepId], tool?.approvalTimeoutMs);
  const expired = expiresAt !== undefined && session.now() >= expiresAt; // the run's clock, as waits read it
  const request = { runId, stepId, toolName: call.name, input: call.input };
  const answer = expired
    ? ({ approved: false, reason: "approval-expired", expiredAt: expiresAt } satisfies Answer)
    : await answerFor(session, calls, tool, request);
  if (answer === undefined) return { kind: "pending" };
  let edited: ApprovalAnswer["edited"];
  if (answer.approved && answer.input !== undefined) {
    const checked = await runWithApproved(calls, runId, stepId, call.name, tool, answer.input);
    edited = { input: checked.recorded, inputDigest: checked.inputDigest };
  }
  // The answer is journaled in the call's turn (the response's call order: callOrder.ts).
  const turn = calls.turnOf(input);
  if (turn !== undefined) await turn;
  // Nothing has run on the answer yet: it is written with the next append, which for an approved
  // call is its tool's start (one append for both, in call order), else the turn's next one.
  const { input: _edited, ...journaled } = answer; // journaled as `edited`, once checked
  const entries = approvalEntries(stepId, call.name, {
    ...journaled,
    inputDigest,
    ...(edited === undefined ? {} : { edited }),
    ...(answer.scope === undefined ? {} : { toolName: call.name }),
  });
  session.appender.defer(...entries);
  if (answer.approved) return { kind: "approved" };
  session.setFed(stepId, { output: session.state.settled[stepId]?.result, isError: true });
  return { kind: "declined" };
}

/** An answer about to be journaled: the given input is checked first and journaled as `edited`. */
type Answer = Omit<ApprovalAnswer, "inputDigest" | "edited"> & { readonly input?: unknown };

/**
 * Who decides a call no decision was journaled for, in this order: an answer given to
 * `run({ approvals })`; the tool's (else the loop's) approval policy, when it allows or denies; a
 * run-wide approval of the same tool given earlier in the run, or a session-wide one given in an
 * earlier message's run of its session; the loop's `approve` callback.
 * Undefined: no one did, the call waits.
 */
async function answerFor(
  session: RunSession,
  calls: ToolCalls,
  tool: Tool | undefined,
  request: ApprovalPolicyRequest,
): Promise<Answer | undefined> {
  const { config, options } = session;
  const given = answerGiven(options.approvals, request.runId, request.stepId);
  if (given !== undefined) {
    const { approved, reason, by, input, scope } = asReply(given);
    return {
      approved,
      ...(by === undefined ? {} : { by }),
      ...(reason === undefined ? {} : { reason }),
      ...(input === undefined ? {} : { input }),
      ...(approved && (scope === "run" || scope === "session") ? { scope } : {}),
    };
  }
  const policy = tool?.approval ?? config.approvalPolicy;
  if (policy !== undefined) {
    const verdict = verdictAnswer(await policy(request));
    if (verdict !== undefined && "invalid" in verdict) {
      throw new AgentLoopConfigError(
        `run ${request.runId} step ${request.stepId}: the approval policy of ${request.toolName} answered ${verdict.invalid}; an approval policy answers "allow", "ask" or { deny: reason }`,
        "badApprovalVerdict",
      );
    }
    if (verdict !== undefined) return { ...verdict, by: "policy" };
  }
  const scopedBy = runScopeOf(session, request.toolName);
  if (scopedBy !== undefined) return { approved: true, by: "scope", scopedBy };
  const inSession = (await calls.sessionScopes())?.get(request.toolName);
  if (inSession !== undefined)
    return { approved: true, by: "scope", scopedBy: inSession.decisionId, scopedIn: inSession.runId };
  if (!config.approve) return undefined;
  const answer = await config.approve(request);
  return answer === "pending" ? undefined : { approved: answer === true };
}

/**
 * The decision id of a run-wide approval of tool `toolName` journaled earlier in the run (a person
 * answered a call of it with `scope: "run"` or `"session"`), or undefined. Read from the run's decisions, so a
 * resume sees the same scopes the first attempt journaled.
 */
function runScopeOf(session: RunSession, toolName: string): string | undefined {
  for (const [id, decision] of Object.entries(session.state.decisions)) {
    if (decision.source !== DECISION_SOURCES.approval) continue;
    const choice = decision.choice as ApprovalChoice | undefined;
    const scoped = choice?.scope === "run" || choice?.scope === "session";
    if (choice?.approved === true && scoped && choice.toolName === toolName) return id;
  }
  return undefined;
}

/** Checks an approved input against the call's tool and has the call run with it. */
async function runWithApproved(
  calls: ToolCalls,
  runId: string,
  stepId: string,
  toolName: string,
  tool: Tool | undefined,
  input: unknown,
): Promise<CheckedInput> {
  const checked = await checkApprovedInput({ runId, stepId, toolName }, tool, input);
  calls.runWith(stepId, checked.value, checked.inputDigest);
  return checked;
}

/**
 * Approval expiry as a pure decision: when a call waiting for approval is declined because its
 * tool's `approvalTimeoutMs` has passed. No clock here: the caller passes `now`.
 */

/** When an approval was first asked for, and its journaled expiry if any (ms since the epoch). */
export interface ApprovalWait {
  readonly requestedAt: number;
  readonly expiresAt?: number;
}

/**
 * When the approval expires (ms since the epoch): the expiry journaled when it was asked for, or
 * else its request time plus the tool's `approvalTimeoutMs`; undefined when it never expires
 * (no timeout, or never asked for yet).
 *
 * @example
 * approvalExpiry({ requestedAt: 1_000 }, 500); // 1_500
 * approvalExpiry(undefined, 500); // undefined: not asked for yet
 */
export function approvalExpiry(wait: ApprovalWait | undefined, timeoutMs: number | undefined): number | undefined {
  if (wait === undefined) return undefined;
  if (wait.expiresAt !== undefined) return wait.expiresAt;
  return timeoutMs === undefined ? undefined : wait.requestedAt + timeoutMs;
}

/**
 * Whether the approval has expired at `now`: the call is then declined as `approval-expired`.
 *
 * @example
 * isApprovalExpired({ requestedAt: 1_000 }, 500, 1_600); // true
 */
export function isApprovalExpired(wait: ApprovalWait | undefined, timeoutMs: number | undefined, now: number): boolean {
  const at = approvalExpiry(wait, timeoutMs);
  return at !== undefined && now >= at;
}

/**
 * What the model is fed for a declined call: by a person (with their reason, if given) or because
 * its approval expired.
 *
 * @example
 * declinedResult("refund", { reason: "over the limit" });
 * // { error: "approval-declined", message: "the call to refund was declined: over the limit" }
 */
export function declinedResult(
  toolName: string,
  why: { readonly reason?: string; readonly expiredAt?: number },
): { readonly error: "approval-declined" | "approval-expired"; readonly message: string } {
  if (why.expiredAt !== undefined) {
    return {
      error: "approval-expired",
      message: `the call to ${toolName} was declined: no one approved it before ${new Date(why.expiredAt).toISOString()}`,
    };
  }
  const message = `the call to ${toolName} was declined`;
  return { error: "approval-declined", message: why.reason ? `${message}: ${why.reason}` : message };
}

/** The call an approval policy is asked about. */
export interface ApprovalPolicyRequest {
  readonly runId: string;
  /** The call's step id (`<loop>#turn:<i>:tool:<j>`). */
  readonly stepId: string;
  readonly toolName: string;
  /** The input the model asked for. */
  readonly input: unknown;
}

/**
 * A policy's answer: `"allow"` runs the call, `{ deny: reason }` declines it (the model is told the
 * reason), `"ask"` leaves it to a person. Its allow and deny are journaled like a person's answer,
 * with `by: "policy"`.
 */
export type ApprovalVerdict = "ask" | "allow" | { readonly deny: string };

/**
 * Decides, before anyone is asked, whether a call runs, is declined or waits for a person
 * (`Tool.approval`, `AgentLoopConfig.approvalPolicy`). Asked once per call: its answer is journaled.
 *
 * @example
 * const approval: ApprovalPolicy = ({ input }) =>
 *   (input as { euros: number }).euros <= 20 ? "allow" : (input as { euros: number }).euros > 500 ? { deny: "over 500 euros" } : "ask";
 */
export type ApprovalPolicy = (request: ApprovalPolicyRequest) => ApprovalVerdict | Promise<ApprovalVerdict>;

/**
 * A verdict as the answer it journals: `undefined` for `"ask"` (a person decides), else approved or
 * declined with the policy's reason; a value that is no verdict gives `{ invalid }` (its JSON), for
 * the caller to refuse.
 *
 * @example
 * verdictAnswer({ deny: "over the limit" }); // { approved: false, reason: "over the limit" }
 * verdictAnswer("ask"); // undefined
 */
export function verdictAnswer(
  verdict: unknown,
): { readonly approved: boolean; readonly reason?: string } | { readonly invalid: string } | undefined {
  if (verdict === "ask") return undefined;
  if (verdict === "allow") return { approved: true };
  const deny = (verdict as { deny?: unknown } | null)?.deny;
  if (typeof verdict === "object" && verdict !== null && typeof deny === "string")
    return { approved: false, reason: deny };
  return { invalid: JSON.stringify(verdict) ?? String(verdict) };
}

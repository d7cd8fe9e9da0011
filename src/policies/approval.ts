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

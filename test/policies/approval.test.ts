import { describe, expect, it } from "vitest";
import { approvalExpiry, declinedResult, isApprovalExpired, verdictAnswer } from "../../src/policies/approval.ts";

describe("approval expiry (a pure decision)", () => {
  it.each([
    // wait, timeoutMs, now, expired
    [undefined, 100, 10_000, false], // never asked for: nothing to expire
    [{ requestedAt: 1_000 }, undefined, 10_000, false], // no timeout
    [{ requestedAt: 1_000 }, 100, 1_099, false],
    [{ requestedAt: 1_000 }, 100, 1_100, true],
    [{ requestedAt: 1_000, expiresAt: 5_000 }, 100, 1_100, false], // the journaled expiry wins
    [{ requestedAt: 1_000, expiresAt: 5_000 }, undefined, 5_000, true],
  ] as const)("%j with timeout %s at %s: expired %s", (wait, timeoutMs, now, expired) => {
    expect(isApprovalExpired(wait, timeoutMs, now)).toBe(expired);
  });

  it("says when, and what the model is told", () => {
    expect(approvalExpiry({ requestedAt: 1_000 }, 500)).toBe(1_500);
    expect(declinedResult("refund", {})).toEqual({
      error: "approval-declined",
      message: "the call to refund was declined",
    });
    expect(declinedResult("refund", { reason: "no" }).message).toBe("the call to refund was declined: no");
    expect(declinedResult("refund", { expiredAt: 0 })).toEqual({
      error: "approval-expired",
      message: "the call to refund was declined: no one approved it before 1970-01-01T00:00:00.000Z",
    });
  });
});

describe("verdictAnswer", () => {
  it("turns allow and deny into the answer journaled, leaves ask to a person, and flags what is no verdict", () => {
    expect(verdictAnswer("allow")).toEqual({ approved: true });
    expect(verdictAnswer({ deny: "over the limit" })).toEqual({ approved: false, reason: "over the limit" });
    expect(verdictAnswer("ask")).toBeUndefined();
    expect(verdictAnswer(true)).toEqual({ invalid: "true" });
    expect(verdictAnswer({ deny: 3 })).toEqual({ invalid: '{"deny":3}' });
    expect(verdictAnswer(undefined)).toEqual({ invalid: "undefined" });
  });
});

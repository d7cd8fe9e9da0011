/**
 * Durable waits as pure decisions (docs/waits.md): what a waiting tool call does when its run is
 * resumed at `now`. No clock here: the caller passes `now`. The wait itself is the journaled
 * decision `<stepId>:wait` (`WaitChoice`, read in projections/waits.ts); the call's frame stays
 * started until the wait ends.
 */
import { type WaitChoice, waitDueAt } from "../projections/waits.ts";

// The journaled wait and its due time are read with the run's other waits; they are part of this policy's API too.
export { asWaitChoice, type WaitChoice, waitDueAt } from "../projections/waits.ts";

/** What a resumed waiting call does now. */
export type WaitDecision =
  /** Not due: the run interrupts again (`waiting`), nothing is journaled. */
  | { readonly kind: "wait"; readonly dueAt: number | undefined }
  /** A sleep is due: the call completes with this output. */
  | { readonly kind: "wake"; readonly output: unknown }
  /** An event wait timed out: the call fails, the model is fed this. */
  | { readonly kind: "expired"; readonly failed: { readonly error: "wait-expired"; readonly message: string } };

/**
 * Decides a waiting call at `now` (its frame not completed): wait on, wake, or expire.
 *
 * @example
 * decideWait({ kind: "sleep", until: "2026-01-04T00:00:00.000Z" }, Date.parse("2026-01-03T00:00:00Z"));
 * // { kind: "wait", dueAt: 1767484800000 }
 */
export function decideWait(wait: WaitChoice, now: number): WaitDecision {
  const dueAt = waitDueAt(wait);
  if (dueAt === undefined || now < dueAt) return { kind: "wait", dueAt };
  if (wait.kind === "sleep")
    return { kind: "wake", output: wait.result === undefined ? { woke: wait.until } : wait.result };
  return {
    kind: "expired",
    failed: {
      error: "wait-expired",
      message: `no event was delivered before ${wait.expiresAt}${wait.what ? ` (${wait.what})` : ""}; the wait timed out`,
    },
  };
}

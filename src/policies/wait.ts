/**
 * Durable waits as pure decisions (docs/waits.md): what a waiting tool call does when its run is
 * resumed at `now`. No clock here: the caller passes `now`. The wait itself is the journaled
 * decision `<stepId>:wait` ({@link WaitChoice}); the call's frame stays started until the wait ends.
 */

/**
 * What a tool call waits for, as journaled in the decision `<stepId>:wait`: a time (`sleep`) or
 * an event delivered with a token (`event`), whose digest alone is journaled.
 */
export type WaitChoice =
  | {
      readonly kind: "sleep";
      /** When the call wakes (ISO 8601). */
      readonly until: string;
      /** The call's output once it wakes (default `{ woke: until }`). */
      readonly result?: unknown;
      /** What the wait is for, shown to operators. */
      readonly what?: string;
    }
  | {
      readonly kind: "event";
      /** sha256 hex of the token (the token itself is never journaled). */
      readonly tokenDigest: string;
      /** When the wait times out (ISO 8601): the call then fails with `wait-expired`. */
      readonly expiresAt?: string;
      readonly what?: string;
      /**
       * The loop's claim-check threshold (`claimCheck.thresholdBytes`), recorded when its blobs are
       * the journal's: a delivered payload whose canonical JSON is longer goes to the journal's
       * blob store, as the tool's own output would. Absent: the payload is journaled inline.
       */
      readonly claimCheckBytes?: number;
    };

/** What a resumed waiting call does now. */
export type WaitDecision =
  /** Not due: the run interrupts again (`waiting`), nothing is journaled. */
  | { readonly kind: "wait"; readonly dueAt: number | undefined }
  /** A sleep is due: the call completes with this output. */
  | { readonly kind: "wake"; readonly output: unknown }
  /** An event wait timed out: the call fails, the model is fed this. */
  | { readonly kind: "expired"; readonly failed: { readonly error: "wait-expired"; readonly message: string } };

/**
 * When a wait next needs its run resumed (ms since the epoch): a sleep's wake time, an event
 * wait's expiry, or undefined for an event wait that never expires (only a delivery ends it).
 *
 * @example
 * waitDueAt({ kind: "sleep", until: "2026-01-04T00:00:00.000Z" }); // 1767484800000
 */
export function waitDueAt(wait: WaitChoice): number | undefined {
  if (wait.kind === "sleep") return Date.parse(wait.until);
  return wait.expiresAt === undefined ? undefined : Date.parse(wait.expiresAt);
}

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

/**
 * Reads a `<stepId>:wait` decision's choice, or undefined when it is not one (a corrupted or
 * foreign entry is never taken for a wait).
 *
 * @example
 * asWaitChoice({ kind: "sleep", until: "2026-01-04T00:00:00.000Z" }); // the choice
 * asWaitChoice({ kind: "nap" }); // undefined
 */
export function asWaitChoice(choice: unknown): WaitChoice | undefined {
  if (choice === null || typeof choice !== "object") return undefined;
  const c = choice as Record<string, unknown>;
  if (c.kind === "sleep" && typeof c.until === "string" && !Number.isNaN(Date.parse(c.until))) return c as WaitChoice;
  if (c.kind === "event" && typeof c.tokenDigest === "string") {
    if (c.expiresAt !== undefined && (typeof c.expiresAt !== "string" || Number.isNaN(Date.parse(c.expiresAt))))
      return undefined;
    const limit = c.claimCheckBytes;
    if (limit !== undefined && !(typeof limit === "number" && Number.isInteger(limit) && limit > 0)) return undefined;
    return c as WaitChoice;
  }
  return undefined;
}

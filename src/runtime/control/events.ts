import { timingSafeEqual } from "node:crypto";
import { digestOfRecorded } from "../../core/digest.ts";
import { runIdProblem, waitId } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import { asWaitChoice } from "../../policies/wait.ts";
import { foldEntries } from "../../projections/runState.ts";
import { eventTokenDigest, parseEventToken } from "../../tools/wait.ts";
import { type ClaimCheck, completedData, recordedOutput } from "../base/callResult.ts";
import { wakeFor } from "./approvals.ts";
import { EventDeliveryError } from "./errors.ts";

/** Options of `deliverEvent`. */
export interface DeliverEventOptions {
  /** The clock the wait's expiry is judged by (ms since the epoch; default `Date.now`). */
  readonly now?: () => number;
  /** Who delivers (the lease's owner name while the payload is journaled). */
  readonly by?: string;
}

/** What `deliverEvent` journaled. */
export interface DeliveredEvent {
  readonly runId: string;
  readonly stepId: string;
  /** The waiting tool's name. */
  readonly toolName: string;
}

const invalidPayload = (runId: string, stepId: string, where: { runId: string; stepId: string }) =>
  new EventDeliveryError(
    "eventPayloadInvalid",
    `run ${runId} step ${stepId}: the payload has no JSON form; send a JSON value`,
    where,
  );

/**
 * Where a delivered payload is claim-checked: the journal's blob store, past the threshold the
 * waiting run recorded with its wait (none recorded, or a journal without blobs: inline).
 */
const deliveryClaimCheck = (journal: Journal, thresholdBytes: number | undefined): ClaimCheck =>
  thresholdBytes === undefined || journal.blobs === undefined ? undefined : { blobs: journal.blobs, thresholdBytes };

/** How long `deliverEvent` holds the run while it journals the payload. */
const DELIVERY_LEASE_MS = 10_000;

const sameDigest = (a: string, b: string) =>
  a.length === b.length && timingSafeEqual(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));

/**
 * Delivers an event to the tool call that waits for it (`ctx.waitForEvent`): journals `payload`
 * as the call's outcome, in one append fenced by the run's ownership and conditional on the
 * version it read, so of two deliveries only one is journaled. The payload is journaled as the
 * tool's own output would be: same digest, and claim-checked into the journal's blob store past
 * the threshold the loop recorded with the wait; pass the journal the loop runs on (its codec and
 * redaction included). The run goes on with it on its next
 * `loop.run` (or `loom wake`); on PostgreSQL the append queues it for its loop's workers. Refused,
 * with nothing journaled, by `EventDeliveryError`: `eventUnknownToken` (forged, mistyped),
 * `eventAlreadyDelivered` (a token is single-use), `eventExpired` (the wait timed out),
 * `eventPayloadInvalid` (no JSON form). `RunBusyError` while a process runs the run (retry later).
 *
 * @example
 * // in the payment provider's webhook handler (or mount eventWebhook)
 * await deliverEvent(journal, token, { paid: true, amount: 4200 });
 * await loop.run({ runId, journal }); // the waiting call's output is the payload
 */
export async function deliverEvent(
  journal: Journal,
  token: string,
  payload: unknown,
  options: DeliverEventOptions = {},
): Promise<DeliveredEvent> {
  const where = typeof token === "string" ? parseEventToken(token) : undefined;
  if (where === undefined || runIdProblem(where.runId) !== undefined) {
    throw new EventDeliveryError(
      "eventUnknownToken",
      "the token is not an event token this journal handed out (lw1.…); check it was copied whole",
    );
  }
  const { runId, stepId } = where;
  if (digestOfRecorded(payload).digest === null) throw invalidPayload(runId, stepId, where);
  const { store } = journal;
  const owner = options.by === undefined ? "deliverEvent" : `deliverEvent by ${options.by}`;
  const lease = await store.acquire(runId, { owner, leaseMs: DELIVERY_LEASE_MS });
  try {
    const state = foldEntries(await readJournal(journal, runId));
    const wait = asWaitChoice(state.decisions[waitId(stepId)]?.choice);
    if (wait?.kind !== "event" || !sameDigest(wait.tokenDigest, eventTokenDigest(token))) {
      throw new EventDeliveryError(
        "eventUnknownToken",
        `run ${runId} step ${stepId}: no call waits for an event with this token; it may be forged or from another journal (loom runs, loom show ${runId})`,
        where,
      );
    }
    const frame = state.frames[stepId];
    if (frame?.status !== "started" || state.status === "completed" || state.status === "cancelled") {
      throw new EventDeliveryError(
        "eventAlreadyDelivered",
        `run ${runId} step ${stepId}: the wait has ended already (delivered, or timed out and fed to the model); a token is delivered once`,
        where,
      );
    }
    const now = options.now?.() ?? Date.now();
    if (wait.expiresAt !== undefined && now >= Date.parse(wait.expiresAt)) {
      throw new EventDeliveryError(
        "eventExpired",
        `run ${runId} step ${stepId}: the wait timed out at ${wait.expiresAt}; the run tells the model when it resumes`,
        where,
      );
    }
    // The same frame the tool's own output would have made: claim-checked past the loop's
    // threshold (recorded with the wait) into the journal's blob store, digested the same way.
    const prepared = await recordedOutput(payload, deliveryClaimCheck(journal, wait.claimCheckBytes));
    if (!prepared.ok) throw invalidPayload(runId, stepId, where);
    const wake = await wakeFor(journal, runId, state);
    await store.append(runId, [{ type: "frame.completed", data: completedData(stepId, prepared) }], {
      expectedVersion: state.version,
      fence: lease.token,
      ...(wake ? { wake } : {}),
    });
    return { runId, stepId, toolName: frame.effect.replace(/^tool:/, "") };
  } finally {
    await store.release(lease);
  }
}

/**
 * The one write path for a call's result, whoever ends the call: the tool that returned it, a
 * sleep that woke, an event delivered to a waiting call (`deliverEvent`, from any process), a
 * person's answer to its approval (in the run, or `recordApproval` from any process). Each is
 * made here (JSON form, digest, claim-check) into the same entries, so the same result ends the
 * same way in the journal (and through the journal's codec and redaction, which every append
 * passes) whichever way it came.
 */
import { canonicalBytesOfParsed } from "../../core/canonicalJson.ts";
import { type Digest, digestOfRecorded, sha256Hex } from "../../core/digest.ts";
import { jsonRoundTrip } from "../../core/jsonForm.ts";
import type { ClaimCheckEnvelope } from "../../events/claimCheck.ts";
import { approvalId, DECISION_SOURCES } from "../../events/ids.ts";
import type { BlobStore } from "../../events/spi.ts";
import type { FrameCompletedData, NewEntry } from "../../events/types.ts";
import { declinedResult } from "../../policies/approval.ts";
import type { AgentLoopConfig } from "./config.ts";

/** A call's output prepared for the journal: what the frame records and what the model is fed. */
export type RecordedOutput =
  | {
      readonly ok: true;
      readonly recorded: unknown;
      readonly fed: unknown;
      readonly digest: Digest;
      /** `recorded` is the envelope of a claim-checked output: the frame marks it `claimChecked`. */
      readonly claimChecked?: true;
    }
  | { readonly ok: false; readonly message: string };

/** Where large outputs go, and from what size: the loop's `claimCheck`. */
export type ClaimCheck = AgentLoopConfig["claimCheck"];

/**
 * Prepares a tool's live output for the journal: its JSON form, members in the order
 * `JSON.parse(JSON.stringify(output))` lists them (what is fed, logged, and read back on a
 * resume), its digest over the canonical text (members sorted), and, when that text
 * exceeds `claimCheck.thresholdBytes`, the envelope of the blob it is put in. The canonical text is
 * written once, as UTF-8 bytes: they are hashed, measured, and kept for the next prompt digest,
 * whose tool message holds the same value (`canonicalBytesOfParsed`). The blob holds the output's
 * JSON text in its own order (as long as the canonical text: the same members, numbers and
 * strings), so a resume reads back what the model was fed live; the envelope's digest is that
 * text's sha256, which the blob store verifies. Made at once (not a promise) unless the output is
 * put in the blob store.
 *
 * @example
 * const out = await recordedOutput({ hits: 3, at: new Date(0) }, undefined); // no claim check: made at once
 * out.ok && out.recorded; // { hits: 3, at: "1970-01-01T00:00:00.000Z" }
 */
export function recordedOutput(output: unknown, claimCheck: ClaimCheck): RecordedOutput | Promise<RecordedOutput> {
  let recorded: unknown;
  try {
    recorded = jsonRoundTrip(output);
  } catch (e) {
    return { ok: false, message: `the tool's output has no JSON form (${(e as Error).message}); return JSON data` };
  }
  if (recorded === undefined) return { ok: true, recorded, fed: recorded, digest: digestOfRecorded(undefined) };
  let canonical: Buffer;
  try {
    canonical = canonicalBytesOfParsed(recorded);
  } catch {
    // No canonical form (a lone surrogate): kept inline, its digest is null.
    return { ok: true, recorded, fed: recorded, digest: digestOfRecorded(recorded) };
  }
  const bytes = canonical.length;
  if (claimCheck && bytes > claimCheck.thresholdBytes) return claimChecked(recorded, claimCheck.blobs);
  return { ok: true, recorded, fed: recorded, digest: { digest: sha256Hex(canonical), bytes } };
}

/** An output put in the blob store: the envelope is recorded, the output fed. */
async function claimChecked(recorded: unknown, blobs: BlobStore): Promise<RecordedOutput> {
  const info = await blobs.put(Buffer.from(JSON.stringify(recorded)));
  const envelope: ClaimCheckEnvelope = { __loomClaimCheck: 1, ref: info.ref, size: info.size, digest: info.digest };
  return { ok: true, recorded: envelope, fed: recorded, digest: digestOfRecorded(envelope), claimChecked: true };
}

/**
 * The data of the `frame.completed` that ends call `stepId` with a prepared output: its digest
 * and size, the claim-check mark beside the output when it is an envelope (where no tool can write
 * it: src/events/claimCheck.ts), and the output as recorded.
 *
 * @example
 * const prepared = await recordedOutput(payload, claimCheck);
 * if (prepared.ok) await store.append(runId, [{ type: "frame.completed", data: completedData(stepId, prepared) }]);
 */
export function completedData(stepId: string, prepared: Extract<RecordedOutput, { ok: true }>): FrameCompletedData {
  const { digest, bytes } = prepared.digest;
  return prepared.claimChecked
    ? { frameId: stepId, digest, bytes, claimChecked: true, output: prepared.recorded }
    : { frameId: stepId, digest, bytes, output: prepared.recorded };
}

/** An answer to a call's approval, as journaled. */
export interface ApprovalAnswer {
  readonly approved: boolean;
  /** The digest of the input it answers for: the input the model asked for. */
  readonly inputDigest: string | null;
  /** Who answered (`recordApproval`'s `by`; `"policy"` for a policy's answer, `"scope"` for a scoped approval's). */
  readonly by?: string;
  /** Why (a person's or a policy's reason, or `approval-expired`). */
  readonly reason?: string;
  /** When the request expired (ms since the epoch), for a call declined because no one answered in time. */
  readonly expiredAt?: number;
  /**
   * Approved with a changed input: the call runs with it instead of the model's. Journaled with
   * its digest beside the model's input digest.
   */
  readonly edited?: { readonly input: unknown; readonly inputDigest: string };
  /** Approved for every later call of the tool in this run (`"run"`), or in this session's later messages too (`"session"`). */
  readonly scope?: "run" | "session";
  /** The tool (journaled with a scoped approval: later calls of it look the scope up by name). */
  readonly toolName?: string;
  /** The scoped approval that approved this call: its decision id. */
  readonly scopedBy?: string;
  /** The run whose decision `scopedBy` is, when it is an earlier message's run of the session. */
  readonly scopedIn?: string;
}

/**
 * The entries that journal an answer to call `stepId`'s approval: its decision, and for a
 * decline the call's `call.settled` with what the model is told.
 *
 * @example
 * approvalEntries(stepId, "refund", { approved: false, inputDigest, by: "ana", reason: "over the limit" });
 * // [decision.recorded <stepId>:approval, call.settled (approval-declined)]
 */
export function approvalEntries(stepId: string, toolName: string, answer: ApprovalAnswer): NewEntry[] {
  const { approved, inputDigest, by, reason, expiredAt, edited, scope, scopedBy, scopedIn } = answer;
  const choice = {
    approved,
    inputDigest,
    ...(by === undefined ? {} : { by }),
    ...(reason === undefined ? {} : { reason }),
    ...(approved && edited !== undefined
      ? { approvedInput: edited.input, approvedInputDigest: edited.inputDigest }
      : {}),
    ...(approved && scope !== undefined ? { scope, toolName } : {}),
    ...(approved && scopedBy !== undefined ? { scopedBy } : {}),
    ...(approved && scopedIn !== undefined ? { scopedIn } : {}),
  };
  const decision: NewEntry = {
    type: "decision.recorded",
    data: { decisionId: approvalId(stepId), source: DECISION_SOURCES.approval, choice },
  };
  if (approved) return [decision];
  const expired = expiredAt !== undefined;
  const result = declinedResult(toolName, expired ? { expiredAt } : reason === undefined ? {} : { reason });
  const settled = expired ? "approval-expired" : "approval-declined";
  return [decision, { type: "call.settled", data: { stepId, status: "error", reason: settled, result } }];
}

/** A journaled approval decision's choice, as {@link approvalEntries} writes it (old journals: the first two fields only). */
export interface ApprovalChoice {
  readonly approved?: boolean;
  readonly inputDigest?: string | null;
  readonly by?: string;
  readonly reason?: string;
  readonly approvedInput?: unknown;
  readonly approvedInputDigest?: string;
  readonly scope?: "run" | "session";
  readonly toolName?: string;
  readonly scopedBy?: string;
  readonly scopedIn?: string;
}

/**
 * The input an approved call runs with, and its digest: the one a person approved in its place
 * (an edited approval), else undefined (the model's own input).
 *
 * @example
 * approvedInputOf(state.decisions[approvalId(stepId)]?.choice); // { input: { euros: 30 }, inputDigest: "9f…" }
 */
export function approvedInputOf(
  choice: unknown,
): { readonly input: unknown; readonly inputDigest: string } | undefined {
  const c = choice as ApprovalChoice | undefined;
  if (c?.approved !== true || typeof c.approvedInputDigest !== "string") return undefined;
  return { input: c.approvedInput, inputDigest: c.approvedInputDigest };
}

import { canonicalBytesOfParsed } from "../../core/canonicalJson.ts";
import { digestOfRecorded, sha256Hex } from "../../core/digest.ts";
import { jsonRoundTrip } from "../../core/jsonForm.ts";
import type { ClaimCheckEnvelope } from "../../events/claimCheck.ts";
import type { BlobStore } from "../../events/spi.ts";
import type { AgentLoopConfig } from "../base/config.ts";
import type { RecordedOutput } from "./session.ts";

/**
 * Prepares a tool's live output for the journal: its JSON form, members in the order
 * `JSON.parse(JSON.stringify(output))` lists them (what is fed, logged, and read back on a
 * resume), its digest over the canonical text (ADR 0142 D2: members sorted), and, when that text
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
export function recordedOutput(
  output: unknown,
  claimCheck: AgentLoopConfig["claimCheck"],
): RecordedOutput | Promise<RecordedOutput> {
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

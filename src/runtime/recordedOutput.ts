import { canonicalBytesOfParsed } from "../core/canonicalJson.ts";
import { digestOfRecorded, sha256Hex } from "../core/digest.ts";
import { jsonRoundTripSorted } from "../core/jsonForm.ts";
import type { ClaimCheckEnvelope } from "../events/claimCheck.ts";
import type { AgentLoopConfig } from "./config.ts";
import type { RecordedOutput } from "./session.ts";

/**
 * Prepares a tool's live output for the journal: its JSON form, members in canonical order
 * (`jsonRoundTripSorted`: the order a resume reads back from the canonical text), its
 * digest over the canonical text, and, when that text exceeds `claimCheck.thresholdBytes`, the
 * envelope of the blob it is put in. The canonical text is written once, as UTF-8 bytes: they are
 * hashed, measured, put in the blob, and kept for the next prompt digest, whose tool message
 * holds the same value (`canonicalBytesOfParsed`); an output kept inline also gives that text
 * (`text`), which its frame hands to the store instead of a second serialization.
 *
 * @example
 * const out = await recordedOutput({ hits: 3, at: new Date(0) }, undefined);
 * out.ok && out.recorded; // { at: "1970-01-01T00:00:00.000Z", hits: 3 }
 */
export async function recordedOutput(
  output: unknown,
  claimCheck: AgentLoopConfig["claimCheck"],
): Promise<RecordedOutput> {
  let recorded: unknown;
  try {
    recorded = jsonRoundTripSorted(output);
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
  if (claimCheck && bytes > claimCheck.thresholdBytes) {
    const info = await claimCheck.blobs.put(canonical);
    const envelope: ClaimCheckEnvelope = { __loomClaimCheck: 1, ref: info.ref, size: info.size, digest: info.digest };
    return { ok: true, recorded: envelope, fed: recorded, digest: digestOfRecorded(envelope), claimChecked: true };
  }
  return {
    ok: true,
    recorded,
    fed: recorded,
    digest: { digest: sha256Hex(canonical), bytes },
    text: canonical.toString("utf8"),
  };
}

/**
 * The claim-check envelope's grammar. When a tool output's canonical JSON
 * exceeds the threshold, its bytes go to a `BlobStore` and the tool frame records the envelope in
 * place of the output, with `claimChecked: true` beside it in the frame's data:
 *
 *   `{ frameId, digest, bytes, claimChecked: true, output: { __loomClaimCheck: 1, ref, size, digest } }`
 *
 * The mark is what makes an envelope the runtime's: a tool controls only `output`, never the
 * frame's other fields, so an output that merely looks like an envelope (a forged one, naming
 * another run's blob) is plain data wherever it is read. {@link claimCheckOf} is the one reader.
 * Entries written before the mark existed (Loom 0.1.0, and `meta.v` 1 entries without it) hold
 * no mark: their envelope-shaped outputs are plain data too (see the CHANGELOG).
 */

/** The envelope a claim-checked frame records in place of the output. */
export interface ClaimCheckEnvelope {
  readonly __loomClaimCheck: 1;
  /** The blob store key (`sha256:<hex>`). */
  readonly ref: string;
  /** The blob's size in bytes. */
  readonly size: number;
  /** sha256 hex of the blob: what the blob store verifies a read against. */
  readonly digest: string;
}

/**
 * Whether a value has the envelope's shape. The shape alone proves nothing (a tool can return
 * it): only {@link claimCheckOf} says whether a frame's output is an envelope the runtime wrote.
 *
 * @example
 * isClaimCheckEnvelope({ __loomClaimCheck: 1, ref: "sha256:…", size: 9000, digest: "…" }); // true
 */
export const isClaimCheckEnvelope = (v: unknown): v is ClaimCheckEnvelope =>
  typeof v === "object" &&
  v !== null &&
  (v as ClaimCheckEnvelope).__loomClaimCheck === 1 &&
  typeof (v as ClaimCheckEnvelope).ref === "string" &&
  typeof (v as ClaimCheckEnvelope).digest === "string";

/**
 * The envelope a completed frame's data holds, if the runtime claim-checked its output (the
 * `claimChecked: true` mark beside an envelope-shaped output); undefined for any other frame,
 * including one whose output only looks like an envelope.
 *
 * @example
 * claimCheckOf(entry.data); // the envelope to resolve through the blob store, or undefined: plain data
 */
export function claimCheckOf(data: {
  readonly output?: unknown;
  readonly claimChecked?: unknown;
}): ClaimCheckEnvelope | undefined {
  return data.claimChecked === true && isClaimCheckEnvelope(data.output) ? data.output : undefined;
}

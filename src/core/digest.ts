import * as crypto from "node:crypto";
import { canonicalBytesOfParsed, withCanonicalBytes } from "./canonicalJson.ts";
import { jsonRoundTrip } from "./jsonForm.ts";

/**
 * SHA-256 of a string (as UTF-8) or of bytes, as lowercase hex.
 *
 * @example
 * sha256Hex("abc"); // "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
 */
export function sha256Hex(input: string | Uint8Array): string {
  // A long string built by concatenation is a rope; encoding it to a Buffer first flattens it
  // faster than Hash#update walks it (measured in bench/digest.ts: about 1.3× on 1 MB).
  const data = typeof input === "string" && input.length > 65_536 ? Buffer.from(input, "utf8") : input;
  return oneShot ? oneShot("sha256", data, "hex") : crypto.createHash("sha256").update(data).digest("hex");
}

// `crypto.hash` (Node ≥ 20.12) digests without a Hash object: about twice as fast on the short
// texts a run digests (call inputs, chained prompt digests). Older Node 20 takes createHash.
const oneShot = (crypto as { hash?: (algorithm: string, data: string | Uint8Array, encoding: "hex") => string }).hash;

/** The digest of a value's recorded (JSON) form, and the UTF-8 size of its canonical text. */
export interface Digest {
  readonly digest: string | null;
  readonly bytes: number;
}

/** The digest of canonical text given as its UTF-8 bytes. */
const digestOfBytes = (bytes: Uint8Array): Digest => ({ digest: sha256Hex(bytes), bytes: bytes.length });

const NO_JSON_FORM: Digest = Object.freeze({ digest: null, bytes: 0 });

/**
 * Digests a value as a JSON event store records it: `sha256Hex(canonicalJson(JSON.parse(JSON.stringify(value))))`
 * and the UTF-8 byte length of that canonical text. The JSON round trip makes the live value and
 * its recorded copy digest the same (a Date is its ISO string, a Map is `{}`). A value with no
 * JSON form (undefined, a function, a BigInt, a cycle, too deep, a lone surrogate, a throwing
 * `toJSON` or getter…) gives `{ digest: null, bytes: 0 }`. Never throws.
 *
 * @example
 * digestOf({ when: new Date(0) }).digest === digestOf({ when: "1970-01-01T00:00:00.000Z" }).digest; // true
 * digestOf(undefined); // { digest: null, bytes: 0 }
 */
export function digestOf(value: unknown): Digest {
  try {
    const recorded = jsonRoundTrip(value);
    if (recorded === undefined) return NO_JSON_FORM;
    return withCanonicalBytes(recorded, digestOfBytes);
  } catch {
    return NO_JSON_FORM;
  }
}

/**
 * The digest of a value already in its recorded form (parsed from JSON, or built of plain JSON
 * data): {@link digestOf} without the JSON round trip. Like it, `{ digest: null, bytes: 0 }` for
 * a value with no canonical form, and never throws.
 *
 * @example
 * digestOfRecorded(JSON.parse(text)).digest === digestOf(JSON.parse(text)).digest; // true
 */
export function digestOfRecorded(value: unknown): Digest {
  try {
    return withCanonicalBytes(value, digestOfBytes);
  } catch {
    return NO_JSON_FORM;
  }
}

/**
 * {@link digestOfRecorded} of a value parsed from JSON that nobody will change (a tool's recorded
 * output): its canonical bytes are kept for the next canonical write that holds it (`canonicalBytesOfParsed`).
 *
 * @example
 * const output = JSON.parse(text);
 * digestOfParsed(output).digest === digestOfRecorded(output).digest; // true
 */
export function digestOfParsed(value: unknown): Digest {
  try {
    return digestOfBytes(canonicalBytesOfParsed(value));
  } catch {
    return NO_JSON_FORM;
  }
}

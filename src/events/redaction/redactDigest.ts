import { createHmac, timingSafeEqual } from "node:crypto";
import { withCanonicalBytes } from "../../core/canonicalJson.ts";
import { jsonRoundTrip } from "../../core/jsonForm.ts";
import type { KeyProvider } from "../codec/codec.ts";

/**
 * Keyed digests of redacted originals. A plain sha256 of a redacted value lets anyone who reads
 * the journal test guesses: a 6-digit PIN is found by hashing the million candidates. A keyed
 * digest (HMAC-SHA256) can only be computed, and so checked, by whoever holds the key.
 *
 * Its text is `hmac-sha256:<keyId>:<64 hex>`, so a reader knows which key checks it. The HMAC key
 * is derived from the provider's key (HMAC of a fixed label), so the same provider can serve the
 * codec's encryption without one key doing two jobs.
 */

/** The prefix of a keyed digest's text. */
export const KEYED_PREFIX = "hmac-sha256:";

const LABEL = "loom-redaction-digest-1";

const macKey = (key: Uint8Array) => createHmac("sha256", key).update(LABEL).digest();

/** The HMAC hex of `value`'s canonical JSON under `key`, or null when it has no JSON form. */
function hmacOf(value: unknown, key: Uint8Array): string | null {
  try {
    const recorded = jsonRoundTrip(value);
    if (recorded === undefined) return null;
    return withCanonicalBytes(recorded, (bytes) => createHmac("sha256", macKey(key)).update(bytes).digest("hex"));
  } catch {
    return null; // no JSON form (a cycle, too deep…), as digestOf says
  }
}

/**
 * The keyed digest of `value` under the provider's current key: `hmac-sha256:<keyId>:<hex>`, or
 * null when the value has no JSON form. Throws what `fail` makes when the provider has no usable
 * key.
 */
export async function keyedDigestOf(
  value: unknown,
  keys: KeyProvider,
  fail: (why: string, keyId: string) => Error,
): Promise<string | null> {
  const keyId = keys.currentKeyId();
  let key: Uint8Array | undefined;
  try {
    key = await keys.key(keyId);
  } catch (cause) {
    throw fail(`the key provider failed for key ${JSON.stringify(keyId)}: ${String(cause)}`, keyId);
  }
  if (key === undefined) throw fail(`the key provider has no key ${JSON.stringify(keyId)}`, keyId);
  if (key.byteLength < 32) throw fail(`key ${JSON.stringify(keyId)} is ${key.byteLength} bytes; use 32`, keyId);
  const hex = hmacOf(value, key);
  return hex === null ? null : `${KEYED_PREFIX}${keyId}:${hex}`;
}

/** The key id a keyed digest names, or undefined for any other text (a plain sha256 hex). */
export function keyedDigestKeyId(digest: string | null | undefined): string | undefined {
  if (typeof digest !== "string" || !digest.startsWith(KEYED_PREFIX)) return undefined;
  const rest = digest.slice(KEYED_PREFIX.length);
  const colon = rest.lastIndexOf(":");
  return colon > 0 ? rest.slice(0, colon) : undefined;
}

/** Whether `value` has the keyed digest `digest` under `key` (compared in constant time). */
export function matchesKeyedDigest(value: unknown, digest: string, key: Uint8Array): boolean {
  const keyId = keyedDigestKeyId(digest);
  if (keyId === undefined) return false;
  const hex = hmacOf(value, key);
  if (hex === null) return false;
  const want = Buffer.from(digest.slice(KEYED_PREFIX.length + keyId.length + 1), "utf8");
  const got = Buffer.from(hex, "utf8");
  return want.length === got.length && timingSafeEqual(want, got);
}

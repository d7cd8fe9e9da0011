export { canonicalJson, MAX_CANONICAL_DEPTH } from "./canonicalJson.ts";
export { type Digest, digestOf, digestOfRecorded, sha256Hex } from "./digest.ts";
export * from "./errors.ts";

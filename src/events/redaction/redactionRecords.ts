/**
 * What a redaction leaves in a journal entry: the records of its redacted fields (`data.redacted`),
 * read by the redaction itself, by the originals it keeps, and by every fold of a redacted run.
 */

/** One redacted field, as journaled in `data.redacted`. */
export interface RedactionRecord {
  /** The data field redacted: `input`, `output` or `result`. */
  readonly field: string;
  /**
   * The original's digest: `digestOf(original)`, sha256 hex of its canonical JSON, or with a keyed
   * digest (`RedactionOptions.digest`) `hmac-sha256:<keyId>:<hex>`.
   */
  readonly digest: string | null;
  /** UTF-8 length of the original's canonical JSON (absent with a keyed digest). */
  readonly bytes?: number;
  /** The concrete paths replaced (`$['hits'][0]['email']`), sorted. */
  readonly paths: readonly string[];
  /** Whether the redaction function changed it too (then the paths alone do not reproduce the stored value). */
  readonly fn: boolean;
  /** How many matches of `values` were replaced (absent when none were). */
  readonly values?: number;
  /** A claim-checked output: the blob (by ref) holds the redacted bytes. */
  readonly blob?: string;
}

/** The mark a redacted entry's data carries. */
export const REDACTED_MARK = "redacted";

/**
 * The redaction records of an entry's data (empty when nothing in it was redacted).
 *
 * @example
 * redactedFields(entry.data).map((r) => r.paths); // [["$['email']"]]
 */
export function redactedFields(data: unknown): readonly RedactionRecord[] {
  const records = typeof data === "object" && data !== null ? (data as Record<string, unknown>)[REDACTED_MARK] : [];
  return Array.isArray(records) ? (records as RedactionRecord[]) : [];
}

/** The original output of each blob redaction record, until the frame that names the blob is sealed. */
const blobOriginals = new WeakMap<RedactionRecord, unknown>();

/** Keeps the original output a blob redaction record stands for (see {@link blobOriginalOf}). @internal */
export const keepBlobOriginal = (record: RedactionRecord, original: unknown): void => {
  blobOriginals.set(record, original);
};

/**
 * The original a claim-checked output's redaction record stands for (the value before redaction,
 * whose blob was never written), when this process redacted it; undefined otherwise.
 *
 * @internal
 */
export const blobOriginalOf = (record: RedactionRecord): unknown => blobOriginals.get(record);

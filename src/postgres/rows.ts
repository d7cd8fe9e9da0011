import { encodeRow, TYPE_CODES } from "../events/sqlite/sqliteRows.ts";
import type { EntryType } from "../events/types.ts";

/**
 * The entries of one append as the columns of `loom_entries` (schema version 2), one array per
 * column for an `unnest` insert, with the blobs their texts refer to. The layout is SQLite's
 * (`sqliteRows.ts`): the same code splits a frame's text, so both stores hand it back exactly.
 */
export interface EntryArrays {
  readonly types: number[];
  readonly frames: (string | null)[];
  readonly effects: (string | null)[];
  readonly digests: (Buffer | null)[];
  readonly datas: (string | null)[];
  /** The 32-byte digests of the blobs the texts name (`"sha256:<hex>"`), each once. */
  readonly refs: Buffer[];
}

export function entryArrays(types: readonly EntryType[], texts: readonly string[]): EntryArrays {
  const out: EntryArrays = { types: [], frames: [], effects: [], digests: [], datas: [], refs: [] };
  let seen: Set<string> | undefined; // made only for the appends that name blobs (few do)
  for (let i = 0; i < texts.length; i++) {
    const text = texts[i] as string;
    const c = encodeRow(types[i] as EntryType, text, 0, 0);
    out.types.push(c.type);
    out.frames.push(c.frame);
    out.effects.push(c.effect);
    out.digests.push(c.digest);
    out.datas.push(c.data);
    for (const hex of blobRefsIn(text)) {
      seen ??= new Set();
      if (seen.has(hex)) continue;
      seen.add(hex);
      out.refs.push(Buffer.from(hex, "hex"));
    }
  }
  return out;
}

const REF = /"sha256:([0-9a-f]{64})"/g;

/**
 * The blob digests a stored text names, as `"sha256:<64 hex>"` strings: a claim-check envelope's
 * ref, or anything that looks like one (a false match only keeps a blob longer). The migration
 * from version 1 finds them with the same pattern in SQL ({@link SQL_BLOB_REF}).
 */
export function blobRefsIn(text: string): string[] {
  if (!text.includes('"sha256:')) return [];
  return Array.from(text.matchAll(REF), (m) => m[1] as string);
}

/** {@link blobRefsIn}'s pattern for `regexp_matches`. */
export const SQL_BLOB_REF = `'"sha256:([0-9a-f]{64})"'`;

/** The codes of the types the workers' queue looks at. */
export const CODE = {
  completed: TYPE_CODES["run.completed"],
  failed: TYPE_CODES["run.failed"],
  cancelled: TYPE_CODES["run.cancelled"],
  interrupted: TYPE_CODES["run.interrupted"],
  started: TYPE_CODES["run.started"],
} as const;

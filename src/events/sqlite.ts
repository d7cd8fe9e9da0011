import type Database from "better-sqlite3";
import { ConcurrencyError, JournalFormatError } from "../core/errors.ts";
import { decodeRows, type EntryRow, encodeEntries } from "./rows.ts";
import { openSqliteFile, type SqliteFile, type SqliteOptions, sqliteFileOf } from "./sqliteFile.ts";
import type { AppendOptions, CompactRequest, EventStore, RunSummary } from "./store.ts";
import { type EntryMeta, type JournalEntry, type NewEntry, SCHEMA_VERSION } from "./types.ts";

/** A SQLite store also tells which file it lives in, and compacts synchronously inside a caller's transaction. */
export interface SqliteEventStore extends EventStore {
  readonly [sqliteFileOf]: SqliteFile;
  /** `compact` without its own transaction boundary: a savepoint inside the caller's transaction. */
  compactSync(runId: string, request: CompactRequest): { version: number };
}

type Row = EntryRow;

/** Rows fetched per statement when reading a run. */
const PAGE = 256;

/**
 * The embedded `EventStore`: one SQLite file (better-sqlite3, WAL). Each append is one
 * `BEGIN IMMEDIATE` transaction that checks `expectedVersion` inside it, so appends from several
 * processes on the same file are serialized and a stale writer gets `ConcurrencyError`; the
 * `UNIQUE (run_id, seq)` key backs that up. Data is stored as the text `JSON.stringify` wrote
 * and handed back parsed, key order included. Pass an open `Database` to share it (Loom will not
 * close it), or use `openSqliteJournal` for store, blobs and archive in one file.
 *
 * @example
 * const store = sqliteStore("./loom.db");
 * const { version } = await store.append("run-1", entries, { expectedVersion: 0 });
 * await store.close();
 */
export function sqliteStore(target: string | Database.Database, options?: SqliteOptions): SqliteEventStore {
  return sqliteStoreOn(openSqliteFile(target, options));
}

/** The store on an already opened file (shared with blobs and archive by `openSqliteJournal`). */
export function sqliteStoreOn(shared: SqliteFile): SqliteEventStore {
  const file = shared.acquire();
  const { db } = file;
  const insert = db.prepare("INSERT INTO loom_entries (run_id, seq, type, data, meta) VALUES (?, ?, ?, ?, ?)");
  const versionOf = db.prepare("SELECT max(seq) FROM loom_entries WHERE run_id = ?").pluck();
  const page = db
    .prepare(`SELECT seq, type, data, meta FROM loom_entries WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT ${PAGE}`)
    .raw();
  const remove = db.prepare("DELETE FROM loom_entries WHERE run_id = ? AND seq = ?");
  const runs = db.prepare(
    `SELECT e.run_id AS runId, e.seq AS version, e.type AS lastType, c.n AS entries
       FROM (SELECT run_id, max(seq) AS v, count(*) AS n FROM loom_entries GROUP BY run_id) c
       JOIN loom_entries e ON e.run_id = c.run_id AND e.seq = c.v
      ORDER BY e.run_id`,
  );

  const check = (runId: string, expected: number) => {
    const actual = (versionOf.get(runId) as number | null) ?? 0;
    if (actual !== expected) throw new ConcurrencyError(runId, expected, actual);
  };

  const write = db.transaction((runId: string, types: string[], texts: string[], meta: string, after: number) => {
    check(runId, after);
    for (let i = 0; i < texts.length; i++) insert.run(runId, after + i + 1, types[i], texts[i], meta);
  });

  const compactTx = db.transaction((runId: string, request: CompactRequest, text: string, meta: string) => {
    check(runId, request.expectedVersion);
    for (const seq of request.removeSeqs) {
      if (remove.run(runId, seq).changes !== 1) {
        throw new JournalFormatError(
          runId,
          seq,
          "removeSeqs",
          "no entry at this seq to remove; re-read the run and compact again",
        );
      }
    }
    insert.run(runId, request.expectedVersion + 1, request.marker.type, text, meta);
  });

  // Pages, not one all(): a page's row texts die young once parsed, instead of every row's text
  // staying alive until the last is parsed (GC-bound on long runs). One read transaction, so
  // the pages are one snapshot even while another process appends or compacts.
  const readTx = db.transaction((runId: string, from: number): JournalEntry[] => {
    const out: JournalEntry[] = [];
    for (;;) {
      const rows = page.all(runId, from) as Row[];
      decodeRows(runId, rows, out, "the SQLite file");
      if (rows.length < PAGE) return out;
      from = rows[rows.length - 1]![0] + 1;
    }
  });

  const metaText = () => JSON.stringify({ v: SCHEMA_VERSION, at: new Date().toISOString() } satisfies EntryMeta);

  const compactSync = (runId: string, request: CompactRequest) => {
    const text = encodeEntries(runId, [request.marker], request.expectedVersion).texts[0] as string;
    compactTx.immediate(runId, request, text, metaText());
    return { version: request.expectedVersion + 1 };
  };

  return {
    [sqliteFileOf]: file,

    async append(runId: string, entries: readonly NewEntry[], { expectedVersion }: AppendOptions) {
      const { types, texts } = encodeEntries(runId, entries, expectedVersion);
      write.immediate(runId, types, texts, metaText(), expectedVersion);
      return { version: expectedVersion + entries.length };
    },

    async read(runId: string, options?: { from?: number }) {
      return readTx(runId, options?.from ?? 1);
    },

    async listRuns() {
      return runs.all() as RunSummary[];
    },

    async compact(runId: string, request: CompactRequest) {
      return compactSync(runId, request);
    },

    compactSync,

    async close() {
      file.release();
    },
  };
}

import type Database from "better-sqlite3";
import { JournalFormatError } from "../../core/errors.ts";
import { checkRunId } from "../ids.ts";
import { acquisition, leaseOf, liveHolder, lost, type OwnerRow, stillOwned } from "../ownership.ts";
import { encodeEntries } from "../rows.ts";
import { prefixEnd } from "../runPrefix.ts";
import type {
  AcquireOptions,
  AppendOptions,
  CompactRequest,
  EventStore,
  ListRunsOptions,
  RunLease,
  RunSummary,
  StoredSnapshot,
} from "../store.ts";
import { type EntryType, type JournalEntry, type NewEntry, SCHEMA_VERSION } from "../types.ts";
import { appendCheck } from "./sqliteAppendCheck.ts";
import { walCheckpointer, walPages } from "./sqliteCheckpoint.ts";
import {
  hasRemovedColumn,
  openSqliteFile,
  type SqliteDatabase,
  type SqliteFile,
  type SqliteOptions,
  sqliteFileOf,
} from "./sqliteFile.ts";
import { writeOrFull } from "./sqliteOpen.ts";
import { decodeStoredRows, encodeRow, INSERT_ENTRY, type StoredRow } from "./sqliteRows.ts";
import { walSync } from "./sqliteSync.ts";
import { sqliteWatch } from "./sqliteWatch.ts";

/** A SQLite store also tells which file it lives in, and compacts synchronously inside a caller's transaction. */
export interface SqliteEventStore extends EventStore {
  /** @internal The file it lives in, for one-transaction compaction. */
  readonly [sqliteFileOf]: SqliteFile;
  /** `compact` without its own transaction boundary: a savepoint inside the caller's transaction. */
  compactSync(runId: string, request: CompactRequest): { version: number };
}

/** Rows fetched per statement when reading a run. */
const PAGE = 256;

/**
 * The embedded `EventStore`: one SQLite file (better-sqlite3, WAL). Each append is one
 * `BEGIN IMMEDIATE` transaction that checks `expectedVersion` inside it, so appends from several
 * processes on the same file are serialized and a stale writer gets `ConcurrencyError`; the
 * `UNIQUE (run, seq)` key backs that up. A fenced append checks the run's owner row
 * (`loom_owners`) in the same transaction, and acquiring a run is a write transaction too, so
 * no change of owner slips between the check and the write. Data is stored as the text `JSON.stringify` wrote
 * (laid out as sqliteRows.ts describes; the `loom_journal` view shows it as text) and handed
 * back parsed, key order included. Pass an open `Database` to share it (Loom will not
 * close it), or use `openSqliteJournal` for store, blobs and archive in one file.
 *
 * @example
 * const store = sqliteStore("./loom.db");
 * const { version } = await store.append("run-1", entries, { expectedVersion: 0 });
 * await store.close();
 */
export function sqliteStore(target: string | SqliteDatabase, options?: SqliteOptions): SqliteEventStore {
  return sqliteStoreOn(openSqliteFile(target, options));
}

/** The store on an already opened file (shared with blobs and archive by `openSqliteJournal`). */
export function sqliteStoreOn(shared: SqliteFile): SqliteEventStore {
  const file = shared.acquire();
  const { db } = file;
  const where = `the SQLite file ${db.name}`;
  const watching = sqliteWatch(file);
  // Appends that need only be written (a model call's start) commit without their fsync, which
  // follows in the background (sqliteSync.ts); only on a WAL file Loom opened at "full".
  const background = file.synchronous === "full" && db.pragma("journal_mode", { simple: true }) === "wal";
  const sync = background ? walSync(db, file.synchronous) : undefined;
  // At "normal", the WAL is checkpointed on a worker thread instead of inside an append (sqliteCheckpoint.ts).
  const checkpoints = file.checkpoints === "background" ? walCheckpointer(db, file.synchronous) : undefined;
  /** Commits without waiting for its fsync where the file allows it (see `walSync`). */
  const lightly = <T>(commit: () => T): T => (sync === undefined ? commit() : sync.relaxed(commit));
  /** A write of run `runId`'s that finds the disk full throws a `JournalFileError` (`diskFull`) naming the run. */
  const full = <T>(runId: string, what: string, write: () => T): T => writeOrFull(db.name, runId, what, write);
  const keyOf = db.prepare("SELECT run FROM loom_runs WHERE run_id = ?").pluck();
  const insert = db.prepare(INSERT_ENTRY);
  const page = db
    .prepare(
      `SELECT seq, type, at, v, frame, effect, digest, data FROM loom_entries WHERE run = ? AND seq >= ? ORDER BY seq LIMIT ${PAGE}`,
    )
    .raw();
  const remove = db.prepare("DELETE FROM loom_entries WHERE run = ? AND seq = ?");
  // A run's entries: its last seq less the seqs removed below it (`loom_runs.removed`, kept by a
  // trigger on delete: sqliteFile.ts), so the list reads one row per run whatever its length.
  // A file opened read-only that predates the column counts them, as every Loom before it did.
  const entries = hasRemovedColumn(db)
    ? "e.seq - r.removed"
    : "(SELECT count(*) FROM loom_entries n WHERE n.run = r.run)";
  // The runs in run_id order (loom_runs' run_id index), each with its last entry through the
  // (run, seq) key; `range`: those whose id starts with a prefix (BINARY: UTF-8 byte order).
  const runsIn = (range: string) =>
    db.prepare(
      `SELECT r.run_id AS runId, e.seq AS version, coalesce(t.type, 'code ' || e.type) AS lastType, ${entries} AS entries
         FROM loom_runs r
         JOIN loom_entries e ON e.run = r.run AND e.seq = (SELECT max(seq) FROM loom_entries m WHERE m.run = r.run)
         LEFT JOIN loom_entry_types t ON t.code = e.type
        ${range} ORDER BY r.run_id`,
    );
  const runs = runsIn("");
  let between: Database.Statement | undefined;
  let from: Database.Statement | undefined;
  const runsBetween = () => (between ??= runsIn("WHERE r.run_id >= ? AND r.run_id < ?"));
  const runsFrom = () => (from ??= runsIn("WHERE r.run_id >= ?"));

  // Prepared on first use: a file opened only to read (by a newer reader, or read-only) needs no owner table.
  let owners:
    | {
        get: Database.Statement;
        set: Database.Statement;
        cancel: Database.Statement;
        requestCancel: Database.Statement;
      }
    | undefined;
  const ownerSql = () =>
    (owners ??= {
      get: db.prepare("SELECT token, owner, host, pid, expires_at AS expiresAt FROM loom_owners WHERE run_id = ?"),
      cancel: db.prepare("SELECT reason FROM loom_cancels WHERE run_id = ?").pluck(),
      requestCancel: db.prepare("INSERT OR IGNORE INTO loom_cancels (run_id, reason, at) VALUES (?, ?, ?)"),
      set: db.prepare(
        `INSERT INTO loom_owners (run_id, token, owner, host, pid, expires_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (run_id) DO UPDATE SET token = excluded.token, owner = excluded.owner, host = excluded.host,
           pid = excluded.pid, expires_at = excluded.expires_at`,
      ),
    });
  const owner = (runId: string) => ownerSql().get.get(runId) as OwnerRow | undefined;
  // A read of the owner row alone (`holder`): a file without the table has no owner to report.
  let ownerRow: Database.Statement | null | undefined;
  const ownerRead = () => {
    if (ownerRow !== undefined) return ownerRow ?? undefined;
    const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'loom_owners'").get();
    ownerRow = exists === undefined ? null : ownerSql().get;
    return ownerRow ?? undefined;
  };
  // Snapshots: one row per run, the latest. Prepared on first use; a file opened read-only that
  // predates the table has no snapshot to read.
  let snapshotRead: Database.Statement | null | undefined;
  const snapshotOf = () => {
    if (snapshotRead !== undefined) return snapshotRead ?? undefined;
    const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'loom_snapshots'").get();
    snapshotRead =
      exists === undefined ? null : db.prepare("SELECT seq, digest, body FROM loom_snapshots WHERE run_id = ?");
    return snapshotRead ?? undefined;
  };
  let snapshotWrite: Database.Statement | undefined;
  const putSnapshot = () =>
    (snapshotWrite ??= db.prepare(
      `INSERT INTO loom_snapshots (run_id, seq, digest, body) VALUES (?, ?, ?, ?)
       ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, digest = excluded.digest, body = excluded.body
       WHERE excluded.seq > loom_snapshots.seq`,
    ));
  const put = (runId: string, r: OwnerRow) => ownerSql().set.run(runId, r.token, r.owner, r.host, r.pid, r.expiresAt);
  const cancelOf = (runId: string) => ownerSql().cancel.get(runId) as string | undefined;

  // Ownership changes are write transactions too (BEGIN IMMEDIATE): serialized with every append.
  const acquireTx = db.transaction((runId: string, options: AcquireOptions) => {
    const row = acquisition(runId, owner(runId), options, Date.now());
    put(runId, row);
    return leaseOf(runId, row, cancelOf(runId));
  });
  const renewTx = db.transaction((lease: RunLease, leaseMs: number) => {
    const row = owner(lease.runId);
    if (!stillOwned(row, lease.token)) throw lost(lease.runId, lease.token, row);
    const renewed = { ...row!, expiresAt: Date.now() + leaseMs };
    put(lease.runId, renewed);
    return leaseOf(lease.runId, renewed, cancelOf(lease.runId));
  });
  const requestCancelTx = db.transaction((runId: string, reason: string) => {
    ownerSql().requestCancel.run(runId, reason, Date.now());
    return { holder: liveHolder(owner(runId), Date.now()) };
  });
  const releaseTx = db.transaction((lease: RunLease) => {
    if (stillOwned(owner(lease.runId), lease.token))
      put(lease.runId, { token: lease.token, owner: null, host: null, pid: null, expiresAt: 0 });
  });

  /**
   * The run's key and version, checked against `expected` (and the fence, when there is one) in
   * one statement; a new run gets its key here.
   */
  const checkAppend = appendCheck(db);
  const check = (runId: string, expected: number) => checkAppend(runId, expected, undefined, []);

  const insertRows = (key: number | bigint, after: number, types: readonly EntryType[], texts: readonly string[]) => {
    const at = Date.now();
    for (let i = 0; i < texts.length; i++) {
      const c = encodeRow(types[i] as EntryType, texts[i] as string, at, SCHEMA_VERSION);
      insert.run(key, after + i + 1, c.type, c.at, c.v, c.frame, c.effect, c.digest, c.data);
    }
  };

  const write = db.transaction(
    (
      runId: string,
      entries: readonly NewEntry[],
      types: EntryType[],
      texts: string[],
      after: number,
      fence: number | undefined,
    ) => {
      insertRows(checkAppend(runId, after, fence, entries), after, types, texts);
    },
  );

  // The marker first, then the removals: each removed row is then below the run's last seq, which
  // the trigger that keeps `loom_runs.removed` counts as one removed (sqliteFile.ts).
  const compactTx = db.transaction((runId: string, request: CompactRequest, text: string) => {
    const key = check(runId, request.expectedVersion);
    insertRows(key, request.expectedVersion, [request.marker.type], [text]);
    for (const seq of request.removeSeqs) {
      if (remove.run(key, seq).changes !== 1) {
        throw new JournalFormatError(
          runId,
          seq,
          "removeSeqs",
          "no entry at this seq to remove; re-read the run and compact again",
        );
      }
    }
  });

  // Pages, not one all(): a page's row texts die young once parsed, instead of every row's text
  // staying alive until the last is parsed (GC-bound on long runs). One read transaction, so
  // the pages are one snapshot even while another process appends or compacts.
  const readTx = db.transaction((runId: string, from: number): JournalEntry[] => {
    const out: JournalEntry[] = [];
    const key = keyOf.get(runId) as number | undefined;
    if (key === undefined) return out;
    for (;;) {
      const rows = page.all(key, from) as StoredRow[];
      decodeStoredRows(runId, rows, out, where);
      if (rows.length < PAGE) return out;
      from = rows[rows.length - 1]![0] + 1;
    }
  });

  const compactSync = (runId: string, request: CompactRequest) => {
    checkRunId(runId, "compact");
    const text = encodeEntries(runId, [request.marker], request.expectedVersion).texts[0] as string;
    full(runId, "compacting it", () => compactTx.immediate(runId, request, text));
    return { version: request.expectedVersion + 1 };
  };

  return {
    [sqliteFileOf]: file,

    async append(runId: string, entries: readonly NewEntry[], options: AppendOptions) {
      const { expectedVersion, fence } = options;
      checkRunId(runId, "append");
      sync?.check(runId);
      const { types, texts } = encodeEntries(runId, entries, expectedVersion);
      const what = `appending ${entries.length} entries after seq ${expectedVersion}`;
      if (options.durability === "written") {
        full(runId, what, () => lightly(() => write.immediate(runId, entries, types, texts, expectedVersion, fence)));
      } else {
        full(runId, what, () => write.immediate(runId, entries, types, texts, expectedVersion, fence));
        sync?.covered(); // its fsync flushed the relaxed commits before it
      }
      checkpoints?.wrote(walPages(texts)); // counted only when there is a checkpointer
      if (entries.length > 0) watching.tell(runId);
      return { version: expectedVersion + entries.length };
    },

    async read(runId: string, options?: { from?: number }) {
      checkRunId(runId, "read");
      return readTx(runId, options?.from ?? 1);
    },

    async listRuns(options?: ListRunsOptions) {
      if (options?.prefix === undefined) return runs.all() as RunSummary[];
      const end = prefixEnd(options.prefix);
      return (end === undefined ? runsFrom() : runsBetween()).all(
        options.prefix,
        ...(end === undefined ? [] : [end]),
      ) as RunSummary[];
    },

    async compact(runId: string, request: CompactRequest) {
      return compactSync(runId, request);
    },

    compactSync,

    // Ownership commits need not wait for the disk: a SQLite file's writers all run on its machine,
    // so a power loss that takes back an acquire (or a renewal, a release) has ended every process
    // that could hold the lease; and any later durable commit flushes it first (WAL order).
    async acquire(runId: string, options: AcquireOptions) {
      return full(runId, "taking its lease", () => lightly(() => acquireTx.immediate(runId, options)));
    },

    async renew(lease: RunLease, leaseMs: number) {
      return full(lease.runId, "renewing its lease", () => lightly(() => renewTx.immediate(lease, leaseMs)));
    },

    async release(lease: RunLease) {
      full(lease.runId, "releasing its lease", () => lightly(() => releaseTx.immediate(lease)));
    },

    watch(runId: string, onAppend: () => void) {
      return watching.watch(runId, onAppend);
    },

    async requestCancel(runId: string, reason: string) {
      checkRunId(runId, "requestCancel");
      return full(runId, "recording a cancel request", () => requestCancelTx.immediate(runId, reason));
    },

    async holder(runId: string) {
      return liveHolder(ownerRead()?.get(runId) as OwnerRow | undefined, Date.now());
    },

    async writeSnapshot(runId: string, snapshot: StoredSnapshot) {
      checkRunId(runId, "writeSnapshot");
      // Needs no fsync of its own: a snapshot lost to a power loss is folded again from the entries.
      lightly(() => putSnapshot().run(runId, snapshot.seq, snapshot.digest, snapshot.body));
    },

    async latestSnapshot(runId: string) {
      checkRunId(runId, "latestSnapshot");
      return snapshotOf()?.get(runId) as StoredSnapshot | undefined;
    },

    async close() {
      await sync?.close();
      // Before the file's last connection closes: that one checkpoints and removes the WAL.
      await checkpoints?.close();
      file.release();
    },
  };
}

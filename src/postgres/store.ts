import type pg from "pg";
import { sha256Hex } from "../core/digest.ts";
import { ConcurrencyError, isConcurrencyError, isJournalFormatError, JournalFormatError } from "../core/errors.ts";
import { checkRunId } from "../events/ids.ts";
import { encodeEntries } from "../events/rows.ts";
import { prefixEnd } from "../events/runPrefix.ts";
import { decodeStoredRows, type StoredRow, TYPE_CODES, TYPE_OF } from "../events/sqlite/sqliteRows.ts";
import type {
  AcquireOptions,
  AppendOptions,
  CompactRequest,
  EventStore,
  ListRunsOptions,
  RunLease,
  RunSummary,
  StoredSnapshot,
} from "../events/store.ts";
import { type EntryType, type JournalEntry, type NewEntry, SCHEMA_VERSION } from "../events/types.ts";
import { appendBatcher } from "./appendBatch.ts";
import { watchAppends } from "./appendNotify.ts";
import { openPgDatabase, type PgDatabase, type PostgresOptions, pgDatabaseOf } from "./database.ts";
import { handBackCtes, queueCte, wakeSql } from "./leases.ts";
import { notifyDue } from "./notify.ts";
import { pgOwners } from "./owners.ts";
import { prunePostgres } from "./prune.ts";
import { entryArrays } from "./rows.ts";
import type { Tables } from "./schema.ts";

/** The worker's last append of a run (see `appendSql`'s `finishing`). */
export const appendFinishing: unique symbol = Symbol("loom.pgAppendFinishing");

/** A postgres store also tells which database it lives in (for submitRun and the workers). */
export interface PostgresEventStore extends EventStore {
  readonly [pgDatabaseOf]: PgDatabase;
  /**
   * Internal, for workers: `append`, and once written, the run taken off the queue (the row
   * `queueOwner` holds) and its ownership (`options.fence`) released, in the same statement.
   */
  readonly [appendFinishing]: (
    runId: string,
    entries: readonly NewEntry[],
    options: AppendOptions,
    queueOwner: string,
  ) => Promise<{ version: number }>;
  /** Settles once the tables exist and their version is checked (every operation awaits it too). */
  ready(): Promise<void>;
}

/**
 * The `EventStore` on PostgreSQL (`pg`), for many processes on many machines. An append is one
 * statement, so one transaction (see `appendEntries`; the appends of many runs asked for while
 * earlier ones are being written share one statement and one commit, each run's checks its own:
 * appendBatch.ts): it moves the run's row in `loom_runs` only
 * from `expectedVersion` (an UPDATE whose condition PostgreSQL checks again on the row's latest
 * version if another append moved it meanwhile), and inserts the entries only when the row moved,
 * or writes nothing. The unique `run_id` backs that up for a run's first append, where there is
 * no row yet: the loser of that race gets a unique violation, reported as `ConcurrencyError`. A fenced append also reads the run's owner row (`loom_owners`, see owners.ts)
 * FOR SHARE in the same statement and writes nothing unless its token still owns the run
 * (`OwnershipLostError`). Entries are laid out as SQLite's (`sqliteRows.ts`: integer run and type
 * keys, meta as two columns, a frame's id and digest in columns, the rest as the exact text
 * `JSON.stringify` wrote), so a run resumed from PostgreSQL is byte-identical to the live one.
 *
 * Pass a URL (Loom creates the pool and ends it on `close`) or your own `pg.Pool` (never ended
 * by Loom). Tables are created on open (a version 1 database is migrated, in one transaction);
 * `options.schema` puts them in a schema of their own.
 *
 * @example
 * import { postgresStore } from "loom-agent/postgres";
 * const store = postgresStore(process.env.DATABASE_URL!, { schema: "loom" });
 * const { version } = await store.append("run-1", entries, { expectedVersion: 0 });
 * await store.close();
 */
export function postgresStore(target: string | pg.Pool, options?: PostgresOptions): PostgresEventStore {
  return postgresStoreOn(openPgDatabase(target, options));
}

/** Named statements: parsed once per connection. The name hashes the text (two schemas, two names). */
const named = (text: string) => ({ name: `loom_${sha256Hex(text).slice(0, 20)}`, text });

const cache = new WeakMap<Tables, ReturnType<typeof build>>();
const statements = (t: Tables) => {
  let s = cache.get(t);
  if (s === undefined) cache.set(t, (s = build(t)));
  return s;
};

/**
 * The append statement (see `appendEntries`). It announces the append on the `appended` channel
 * only when the run is new or followed (`watched_until`, read from the row it moved: the latest
 * version, so a follower registered before this append's UPDATE is told; appendNotify.ts). A
 * NOTIFY is not free: PostgreSQL serializes notifying commits on one database-wide lock held
 * through the WAL flush, so announcing every append made every append wait for the others'
 * flushes. With `finishing`, the same statement also takes the
 * run off the workers' queue ($14: the queue row's owner; handed back due instead when the run was
 * woken meanwhile, leases.ts) and releases its ownership ($13's token), only if the entries were
 * written: a worker's last append and its release in one commit.
 */
const appendSql = (t: Tables, finishing: boolean, submitting = false, written = false) => `
      WITH ${
        // `durability: "written"`: this statement's transaction commits without waiting for its WAL
        // flush (SET LOCAL, so only this commit). The next flushed commit on the server flushes the
        // WAL up to itself, hence this one too; the WAL writer flushes it within a few hundred ms.
        written ? "relaxed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)),\n      " : ""
      }fence AS (SELECT token FROM ${t.owners} WHERE run_id = $1 AND owner IS NOT NULL
                  AND ($4::smallint = ${TYPE_CODES["run.cancelled"]} OR NOT EXISTS (SELECT 1 FROM ${t.cancels} WHERE run_id = $1))
                FOR SHARE),
      owned AS (SELECT ($13::int IS NULL OR $13::int IS NOT DISTINCT FROM (SELECT token FROM fence)) AS ok${
        written ? " FROM relaxed" : ""
      }),
      added AS (
        INSERT INTO ${t.runs} (updated_at, version, entries, last_type, run_id)
        SELECT $5::bigint, $3::int, $3::int, $4::smallint, $1 FROM owned
         WHERE $2::int = 0 AND owned.ok AND NOT EXISTS (SELECT 1 FROM ${t.runs} WHERE run_id = $1)
        RETURNING run, true AS tell),
      moved AS (
        UPDATE ${t.runs} r SET updated_at = $5::bigint, version = $2::int + $3::int, entries = r.entries + $3::int,
               last_type = $4::smallint
          FROM owned WHERE r.run_id = $1 AND r.version = $2::int AND owned.ok
        RETURNING r.run, r.watched_until > now() AS tell),
      target AS (SELECT run, tell FROM added UNION ALL SELECT run, tell FROM moved),
      ins AS (
        INSERT INTO ${t.entries} (at, run, seq, type, v, frame, effect, digest, data)
        SELECT $5::bigint, target.run, $2::int + x.ord::int, x.type, $6::smallint, x.frame, x.effect, x.digest, x.data
          FROM target, unnest($7::smallint[], $8::text[], $9::text[], $10::bytea[], $11::text[])
               WITH ORDINALITY AS x(type, frame, effect, digest, data, ord)),
      refs AS (
        INSERT INTO ${t.blobRefs} (digest, run) SELECT d, target.run FROM target, unnest($12::bytea[]) AS d
        ON CONFLICT DO NOTHING)${
          finishing
            ? `,
      ${handBackCtes(t, "$1", "$14", { when: "EXISTS (SELECT FROM target)" })},
      released AS (
        UPDATE ${t.owners} SET owner = NULL, host = NULL, pid = NULL, expires_at = to_timestamp(0)
         WHERE run_id = $1 AND token = $13::int AND EXISTS (SELECT FROM target))`
            : ""
        }${
          submitting
            ? `,
      ${queueCte(t, "$1", "$14", "$15", "target")}
      SELECT run, pg_notify('${t.channel}', $14), pg_notify('${t.appended}', $1) FROM target`
            : `
      SELECT run, CASE WHEN tell THEN pg_notify('${t.appended}', $1) END${
        finishing ? `, (SELECT pg_notify('${t.channel}', loop_id) FROM handedBack)` : ""
      } FROM target`
        }`;

function build(t: Tables) {
  return {
    // $1 run id, $2 expected version, $3 entry count, $4 last type code, $5 at (ms), $6 v,
    // $7… the columns of the entries, $12 the digests of the blobs they name.
    // $13, the fence: the owner row is read FOR SHARE, so an acquisition (an UPDATE of that row)
    // waits for this append to commit, and this append sees a committed acquisition's token.
    append: named(appendSql(t, false)),
    /** `append` whose commit does not wait for the WAL flush (`AppendOptions.durability: "written"`). */
    appendWritten: named(appendSql(t, false, false, true)),
    appendFinishing: named(appendSql(t, true)),
    /** A new run's `run.started`, its queue row ($14: its loop id, $15: its tenant) and the NOTIFY (submit.ts). */
    appendSubmitting: named(appendSql(t, false, true)),
    version: named(`SELECT version FROM ${t.runs} WHERE run_id = $1`),
    read: named(
      `SELECT e.seq, e.type, e.at::float8, e.v, e.frame, e.effect, e.digest, e.data
         FROM ${t.entries} e JOIN ${t.runs} r ON r.run = e.run WHERE r.run_id = $1 AND e.seq >= $2 ORDER BY e.seq`,
    ),
    runs: named(`SELECT run_id, version, last_type, entries FROM ${t.runs} ORDER BY run_id COLLATE "C"`),
    /** The runs whose id starts with $1 ($2: `prefixEnd($1)`), a range of the "C" index of run ids. */
    runsBetween: named(
      `SELECT run_id, version, last_type, entries FROM ${t.runs}
        WHERE run_id COLLATE "C" >= $1 AND run_id COLLATE "C" < $2 ORDER BY run_id COLLATE "C"`,
    ),
    /** Keeps the run's latest snapshot: replaces the row only with a higher seq. */
    writeSnapshot: named(
      `INSERT INTO ${t.snapshots} AS s (run_id, seq, digest, body) VALUES ($1, $2, $3, $4)
       ON CONFLICT (run_id) DO UPDATE SET seq = EXCLUDED.seq, digest = EXCLUDED.digest, body = EXCLUDED.body
        WHERE EXCLUDED.seq > s.seq`,
    ),
    latestSnapshot: named(`SELECT seq, digest, body FROM ${t.snapshots} WHERE run_id = $1`),
    runsFrom: named(
      `SELECT run_id, version, last_type, entries FROM ${t.runs} WHERE run_id COLLATE "C" >= $1 ORDER BY run_id COLLATE "C"`,
    ),
  };
}

/**
 * Appends `entries` (checked and serialized by `encodeEntries`) after `expectedVersion`, in one
 * statement on `q`: a pool (its own transaction) or a client inside the caller's (submitRun).
 * True when written; false when the run has moved on (a `ConcurrencyError` for the caller).
 * `finishingFor` (a worker's queue owner): the run's last append, which also takes it off the
 * queue and releases the ownership `fence` holds. `submittingFor` (a loop id): a new run's
 * `run.started`, which also queues the run (for `tenant`, fair claiming) and announces it
 * (`submitRun`). `written` (`AppendOptions.durability: "written"`): the transaction commits with
 * `synchronous_commit` off.
 */
export async function appendEntries(
  q: pg.Pool | pg.PoolClient,
  t: Tables,
  runId: string,
  expectedVersion: number,
  types: readonly EntryType[],
  texts: readonly string[],
  fence?: number,
  finishingFor?: string,
  submittingFor?: string,
  how: { readonly written?: boolean; readonly tenant?: string } = {},
): Promise<boolean> {
  const c = entryArrays(types, texts);
  const last = TYPE_CODES[types[types.length - 1] as EntryType];
  const values: unknown[] = [runId, expectedVersion, types.length, last, Date.now(), SCHEMA_VERSION];
  values.push(c.types, c.frames, c.effects, c.digests, c.datas, c.refs, fence ?? null);
  const sql = statements(t);
  const variant = finishingFor ?? submittingFor;
  if (variant !== undefined) values.push(variant);
  if (finishingFor === undefined && submittingFor !== undefined) values.push(how.tenant ?? "");
  const statement =
    finishingFor !== undefined
      ? sql.appendFinishing
      : submittingFor !== undefined
        ? sql.appendSubmitting
        : how.written
          ? sql.appendWritten
          : sql.append;
  const result = await q.query({ ...statement, values });
  return result.rowCount === 1;
}

/** The store on an already opened database (shared with blobs and archive by `openPostgresJournal`). */
export function postgresStoreOn(shared: PgDatabase): PostgresEventStore {
  const db = shared.acquire();
  const { pool, tables } = db;
  const sql = statements(tables);
  const owners = pgOwners(db);
  // Appends of runs already started, from many runs at once, go out together (appendBatch.ts) on
  // at most half the pool's connections: the rest stay for claims, reads and renewals.
  const poolMax = (pool as { options?: { max?: number } }).options?.max ?? 10;
  const batches = appendBatcher(
    tables,
    SCHEMA_VERSION,
    Math.max(1, Math.floor(poolMax / 2)),
    (statement) => pool.query<{ run_id: string | null }>(statement),
    (a) =>
      appendEntries(pool, tables, a.runId, a.expectedVersion, a.types, a.texts, a.fence, a.finishingFor, undefined, {
        written: a.written,
      }),
  );

  const versionOf = async (q: pg.Pool | pg.PoolClient, runId: string): Promise<number> =>
    (await q.query<{ version: number }>({ ...sql.version, values: [runId] })).rows[0]?.version ?? 0;

  /** A lost race: the unique (run_id, seq) key, or a serialization failure under a stricter isolation. */
  const lostRace = async (runId: string, expected: number, e: unknown): Promise<never> => {
    const code = (e as { code?: unknown }).code;
    if (code === "23505" || code === "40001") throw new ConcurrencyError(runId, expected, await versionOf(pool, runId));
    throw e;
  };

  async function append(
    runId: string,
    entries: readonly NewEntry[],
    { expectedVersion, fence, wake, durability }: AppendOptions,
    finishingFor?: string,
  ) {
    checkRunId(runId, "append");
    const { types, texts } = encodeEntries(runId, entries, expectedVersion);
    // A worker's last append (finishing) is never relaxed: the run's result must be flushed.
    const relaxed = durability === "written" && finishingFor === undefined;
    await db.ready;
    /** A refused append: the fence (checked first: a stale owner must stop), else the version. */
    const refused = async () => {
      const notOwned = fence === undefined ? undefined : await owners.fenceRefusal(runId, fence, entries);
      return notOwned ?? new ConcurrencyError(runId, expectedVersion, await versionOf(pool, runId));
    };
    if (entries.length === 0) {
      if (fence !== undefined) {
        const notOwned = await owners.fenceRefusal(runId, fence, entries);
        if (notOwned) throw notOwned;
      }
      const actual = await versionOf(pool, runId);
      if (actual !== expectedVersion) throw new ConcurrencyError(runId, expectedVersion, actual);
      return { version: expectedVersion };
    }
    const written = await (wake !== undefined
      ? appendAndWake(db, wake, runId, (client) =>
          appendEntries(client, tables, runId, expectedVersion, types, texts, fence),
        )
      : expectedVersion > 0
        ? batches.append({
            runId,
            expectedVersion,
            types,
            texts,
            at: Date.now(),
            fence,
            finishingFor,
            written: relaxed,
          })
        : appendEntries(pool, tables, runId, expectedVersion, types, texts, fence, finishingFor, undefined, {
            written: relaxed,
          })
    ).catch((e) => lostRace(runId, expectedVersion, e));
    if (!written) throw await refused();
    return { version: expectedVersion + entries.length };
  }

  const store: PostgresEventStore = {
    [pgDatabaseOf]: db,
    [appendFinishing]: (runId, entries, options, queueOwner) => append(runId, entries, options, queueOwner),
    ready: () => db.ready,
    append: (runId, entries, options) => append(runId, entries, options),

    watch(runId: string, onAppend: () => void) {
      return watchAppends(db, runId, onAppend);
    },

    async read(runId: string, options?: { from?: number }) {
      checkRunId(runId, "read");
      await db.ready;
      const { rows } = await pool.query<[...StoredRow]>({
        ...sql.read,
        values: [runId, options?.from ?? 1],
        rowMode: "array",
      });
      const out: JournalEntry[] = [];
      decodeStoredRows(runId, rows, out, db.label);
      return out;
    },

    async listRuns(options?: ListRunsOptions) {
      await db.ready;
      const prefix = options?.prefix;
      const end = prefix === undefined ? undefined : prefixEnd(prefix);
      const query =
        prefix === undefined
          ? sql.runs
          : end === undefined
            ? { ...sql.runsFrom, values: [prefix] }
            : { ...sql.runsBetween, values: [prefix, end] };
      const { rows } = await pool.query<[string, number, number, number]>({ ...query, rowMode: "array" });
      return rows.map(
        ([runId, version, last, entries]): RunSummary => ({
          runId,
          version,
          lastType: TYPE_OF[last] ?? `code ${last}`,
          entries,
        }),
      );
    },

    async compact(runId: string, request: CompactRequest) {
      checkRunId(runId, "compact");
      const text = encodeEntries(runId, [request.marker], request.expectedVersion).texts[0] as string;
      await db.ready;
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await compactIn(client, tables, runId, request, text);
        await client.query("COMMIT");
      } catch (e) {
        await client.query("ROLLBACK").catch(() => {});
        if (isConcurrencyError(e) || isJournalFormatError(e)) throw e;
        return lostRace(runId, request.expectedVersion, e);
      } finally {
        client.release();
      }
      return { version: request.expectedVersion + 1 };
    },

    acquire: (runId: string, options: AcquireOptions) => owners.acquire(runId, options),
    renew: (lease: RunLease, leaseMs: number) => owners.renew(lease, leaseMs),
    release: (lease: RunLease) => owners.release(lease),
    requestCancel: (runId: string, reason: string) => {
      checkRunId(runId, "requestCancel");
      return owners.requestCancel(runId, reason);
    },
    holder: (runId: string) => owners.holder(runId),
    prune: (request) => prunePostgres(db, request),

    async writeSnapshot(runId: string, snapshot: StoredSnapshot) {
      checkRunId(runId, "writeSnapshot");
      await db.ready;
      await pool.query({
        ...sql.writeSnapshot,
        values: [runId, snapshot.seq, snapshot.digest, snapshot.body],
      });
    },

    async latestSnapshot(runId: string) {
      checkRunId(runId, "latestSnapshot");
      await db.ready;
      const { rows } = await pool.query<StoredSnapshot>({ ...sql.latestSnapshot, values: [runId] });
      return rows[0];
    },

    async close() {
      await db.release();
    },
  };
  ownStores.add(store);
  return store;
}

/**
 * An append that makes the run due for the workers (`AppendOptions.wake`): the entries, the
 * run's queue row (due now) and the announcement, in one transaction, as `submitRun` queues a run.
 * A wake of another run (`wake.runId`: a sub-agent's top-level run) marks its row `woken`, so the
 * claim takes it though its journal ends approval-pending; a worker holding the row now keeps it,
 * and hands it back due when done with it (leases.ts).
 */
async function appendAndWake(
  db: PgDatabase,
  wake: NonNullable<AppendOptions["wake"]>,
  appendedTo: string,
  append: (client: pg.PoolClient) => Promise<boolean>,
): Promise<boolean> {
  const t = db.tables;
  const client = await db.pool.connect();
  try {
    await client.query("BEGIN");
    if (!(await append(client))) {
      await client.query("ROLLBACK");
      return false;
    }
    const { loopId, runId = appendedTo } = wake;
    await client.query(wakeSql(t, runId === appendedTo ? "self" : "other"), [runId, loopId]);
    await client.query(notifyDue(db), [loopId]); // sent on commit
    await client.query("COMMIT");
    return true;
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

/**
 * The stores `postgresStoreOn` made: a worker reads and appends through these directly (the claim
 * reads the run, the last append releases it); through any other store (a wrapper) it calls the
 * store's own methods one by one.
 */
const ownStores = new WeakSet<object>();

/** The journal's store when it is a PostgreSQL store as Loom made it, not a wrapper of one. */
export const ownStore = (store: unknown): PostgresEventStore | undefined =>
  typeof store === "object" && store !== null && ownStores.has(store) ? (store as PostgresEventStore) : undefined;

/** Compaction inside the caller's transaction: lock the run, remove the seqs, append the marker. */
async function compactIn(
  client: pg.PoolClient,
  t: Tables,
  runId: string,
  request: CompactRequest,
  text: string,
): Promise<void> {
  const { expectedVersion, removeSeqs } = request;
  const head = await client.query<{ run: number; version: number }>(
    `SELECT run, version FROM ${t.runs} WHERE run_id = $1 FOR UPDATE`,
    [runId],
  );
  const actual = head.rows[0]?.version ?? 0;
  if (actual !== expectedVersion) throw new ConcurrencyError(runId, expectedVersion, actual);
  const run = head.rows[0]!.run;
  const removed = await client.query<{ seq: number }>(
    `DELETE FROM ${t.entries} WHERE run = $1 AND seq = ANY($2::int[]) RETURNING seq`,
    [run, removeSeqs],
  );
  const gone = new Set(removed.rows.map((r) => r.seq));
  const seen = new Set<number>();
  for (const seq of removeSeqs) {
    if (!gone.has(seq) || seen.has(seq)) {
      throw new JournalFormatError(
        runId,
        seq,
        "removeSeqs",
        "no entry at this seq to remove; re-read the run and compact again",
      );
    }
    seen.add(seq);
  }
  // The run's row now says `expectedVersion - gone + …`: take the entries off, then append the
  // marker as any append would (it moves the row from `expectedVersion`).
  await client.query(`UPDATE ${t.runs} SET entries = entries - $2 WHERE run = $1`, [run, gone.size]);
  if (!(await appendEntries(client, t, runId, expectedVersion, [request.marker.type], [text]))) {
    throw new ConcurrencyError(runId, expectedVersion, actual);
  }
}

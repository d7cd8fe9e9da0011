import type pg from "pg";
import { sha256Hex } from "../core/digest.ts";
import { ConcurrencyError, JournalFormatError } from "../core/errors.ts";
import { decodeRows, encodeEntries } from "../events/rows.ts";
import { checkRunId } from "../events/runId.ts";
import type { AppendOptions, CompactRequest, EventStore, RunSummary } from "../events/store.ts";
import { type EntryMeta, type JournalEntry, type NewEntry, SCHEMA_VERSION } from "../events/types.ts";
import { openPgDatabase, type PgDatabase, type PostgresOptions, pgDatabaseOf } from "./database.ts";
import type { Tables } from "./schema.ts";

/** A postgres store also tells which database it lives in (for submitRun and the workers). */
export interface PostgresEventStore extends EventStore {
  readonly [pgDatabaseOf]: PgDatabase;
  /** Settles once the tables exist and their version is checked (every operation awaits it too). */
  ready(): Promise<void>;
}

type Row = [seq: number, type: string, data: string, meta: string];

/**
 * The `EventStore` on PostgreSQL (`pg`), for many processes on many machines. An append is one
 * statement, so one transaction: it locks the run's row in `loom_streams` (FOR UPDATE), checks
 * `expectedVersion` against it, inserts the entries and moves the row, or writes nothing. The
 * `(run_id, seq)` primary key backs that up for a run's first append, where there is no row to
 * lock yet: the loser of that race gets a unique violation, reported as `ConcurrencyError`.
 * Entry data is a `text` column holding exactly what `JSON.stringify` wrote (not jsonb, which
 * reorders keys), so a run resumed from PostgreSQL is byte-identical to the live one.
 *
 * Pass a URL (Loom creates the pool and ends it on `close`) or your own `pg.Pool` (never ended
 * by Loom). Tables are created on open; `options.schema` puts them in a schema of their own.
 *
 * @example
 * import { postgresStore } from "loom/postgres";
 * const store = postgresStore(process.env.DATABASE_URL!, { schema: "loom" });
 * const { version } = await store.append("run-1", entries, { expectedVersion: 0 });
 * await store.close();
 */
export function postgresStore(target: string | pg.Pool, options?: PostgresOptions): PostgresEventStore {
  return postgresStoreOn(openPgDatabase(target, options));
}

/** Named statements: parsed once per connection. The name hashes the text (two schemas, two names). */
const named = (text: string) => ({ name: `loom_${sha256Hex(text).slice(0, 20)}`, text });

function statements(t: Tables) {
  return {
    append: named(`
      WITH locked AS (SELECT version FROM ${t.streams} WHERE run_id = $1 FOR UPDATE),
      cur AS (SELECT coalesce((SELECT version FROM locked), 0) AS v),
      ins AS (
        INSERT INTO ${t.entries} (run_id, seq, type, data, meta)
        SELECT $1, $2::int + x.ord::int, x.t, x.d, $5
          FROM cur, unnest($3::text[], $4::text[]) WITH ORDINALITY AS x(t, d, ord)
         WHERE cur.v = $2::int
      )
      INSERT INTO ${t.streams} AS s (run_id, version, entries, last_type)
      SELECT $1, $2::int + $6::int, $6::int, $7 FROM cur WHERE cur.v = $2::int
      ON CONFLICT (run_id) DO UPDATE
        SET version = EXCLUDED.version, entries = s.entries + EXCLUDED.entries, last_type = EXCLUDED.last_type
      RETURNING version`),
    version: named(`SELECT version FROM ${t.streams} WHERE run_id = $1`),
    read: named(`SELECT seq, type, data, meta FROM ${t.entries} WHERE run_id = $1 AND seq >= $2 ORDER BY seq`),
    runs: named(`SELECT run_id, version, last_type, entries FROM ${t.streams} ORDER BY run_id COLLATE "C"`),
  };
}

/** The store on an already opened database (shared with blobs and archive by `openPostgresJournal`). */
export function postgresStoreOn(shared: PgDatabase): PostgresEventStore {
  const db = shared.acquire();
  const { pool, tables } = db;
  const sql = statements(tables);
  const metaText = () => JSON.stringify({ v: SCHEMA_VERSION, at: new Date().toISOString() } satisfies EntryMeta);

  const versionOf = async (q: pg.Pool | pg.PoolClient, runId: string): Promise<number> =>
    (await q.query<{ version: number }>({ ...sql.version, values: [runId] })).rows[0]?.version ?? 0;

  /** A lost race: the unique (run_id, seq) key, or a serialization failure under a stricter isolation. */
  const lostRace = async (runId: string, expected: number, e: unknown): Promise<never> => {
    const code = (e as { code?: unknown }).code;
    if (code === "23505" || code === "40001") throw new ConcurrencyError(runId, expected, await versionOf(pool, runId));
    throw e;
  };

  return {
    [pgDatabaseOf]: db,
    ready: () => db.ready,

    async append(runId: string, entries: readonly NewEntry[], { expectedVersion }: AppendOptions) {
      checkRunId(runId, "append");
      const { types, texts } = encodeEntries(runId, entries, expectedVersion);
      await db.ready;
      if (entries.length === 0) {
        const actual = await versionOf(pool, runId);
        if (actual !== expectedVersion) throw new ConcurrencyError(runId, expectedVersion, actual);
        return { version: expectedVersion };
      }
      const last = types[types.length - 1]!;
      const values = [runId, expectedVersion, types, texts, metaText(), entries.length, last];
      const result = await pool.query({ ...sql.append, values }).catch((e) => lostRace(runId, expectedVersion, e));
      if (result.rowCount !== 1) {
        throw new ConcurrencyError(runId, expectedVersion, await versionOf(pool, runId));
      }
      return { version: expectedVersion + entries.length };
    },

    async read(runId: string, options?: { from?: number }) {
      checkRunId(runId, "read");
      await db.ready;
      const { rows } = await pool.query<Row>({ ...sql.read, values: [runId, options?.from ?? 1], rowMode: "array" });
      const out: JournalEntry[] = [];
      decodeRows(runId, rows, out, db.label);
      return out;
    },

    async listRuns() {
      await db.ready;
      const { rows } = await pool.query<[string, number, string, number]>({ ...sql.runs, rowMode: "array" });
      return rows.map(([runId, version, lastType, entries]): RunSummary => ({ runId, version, lastType, entries }));
    },

    async compact(runId: string, request: CompactRequest) {
      checkRunId(runId, "compact");
      const text = encodeEntries(runId, [request.marker], request.expectedVersion).texts[0] as string;
      await db.ready;
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await compactIn(client, tables, runId, request, text, metaText());
        await client.query("COMMIT");
      } catch (e) {
        await client.query("ROLLBACK").catch(() => {});
        if (e instanceof ConcurrencyError || e instanceof JournalFormatError) throw e;
        return lostRace(runId, request.expectedVersion, e);
      } finally {
        client.release();
      }
      return { version: request.expectedVersion + 1 };
    },

    async close() {
      await db.release();
    },
  };
}

/** Compaction inside the caller's transaction: lock the run, remove the seqs, append the marker. */
async function compactIn(
  client: pg.PoolClient,
  t: Tables,
  runId: string,
  request: CompactRequest,
  text: string,
  meta: string,
): Promise<void> {
  const { expectedVersion, removeSeqs } = request;
  const head = await client.query<{ version: number }>(
    `SELECT version FROM ${t.streams} WHERE run_id = $1 FOR UPDATE`,
    [runId],
  );
  const actual = head.rows[0]?.version ?? 0;
  if (actual !== expectedVersion) throw new ConcurrencyError(runId, expectedVersion, actual);
  const removed = await client.query<{ seq: number }>(
    `DELETE FROM ${t.entries} WHERE run_id = $1 AND seq = ANY($2::int[]) RETURNING seq`,
    [runId, removeSeqs],
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
  await client.query(`INSERT INTO ${t.entries} (run_id, seq, type, data, meta) VALUES ($1, $2, $3, $4, $5)`, [
    runId,
    expectedVersion + 1,
    request.marker.type,
    text,
    meta,
  ]);
  await client.query(
    `INSERT INTO ${t.streams} AS s (run_id, version, entries, last_type) VALUES ($1, $2, 1, $3)
     ON CONFLICT (run_id) DO UPDATE SET version = EXCLUDED.version, entries = s.entries - $4 + 1, last_type = EXCLUDED.last_type`,
    [runId, expectedVersion + 1, request.marker.type, gone.size],
  );
}

import type pg from "pg";
import { sqlDataText, TYPE_CODES } from "../events/sqlite/sqliteRows.ts";
import { PostgresSchemaError } from "./errors.ts";
import { migrateFromV1, renameV1 } from "./migrate.ts";
import type { Tables } from "./tables.ts";

// The table names are read by the migrations too; the schema's API hands them out from here.
export { type Tables, tablesIn } from "./tables.ts";

/**
 * The version of the tables below, recorded in `loom_meta` so a later Loom can migrate. 3 added
 * `loom_runs.watched_until`: appends announce themselves only for runs someone follows. 4 added
 * `loom_leases.woken`: a run queued by a sub-agent's approval is claimed though its journal ends
 * approval-pending (leases.ts); and `loom_runs_id_c`, the run ids in "C" order, so the runs under
 * a prefix (a run's sub-agents) are a range of an index whatever the database's collation. 5 added
 * `loom_schedules`, each schedule's last handled tick (scheduler.ts), and `loom_snapshots`, each
 * run's latest snapshot: new tables only. 6 added `loom_leases.tenant` (whose run it is, for fair
 * claiming) with its index, `loom_tenants` (when each tenant was last served: the claim serves the
 * least recently served first) and `loom_rate_limits` (token buckets shared by every worker).
 */
export const POSTGRES_SCHEMA_VERSION = 6;

/**
 * Version 2. Columns are ordered widest first, so no byte goes to alignment padding. An entry row
 * spends about 30 bytes beside its data (v1: about 100): the run and type are integers, `meta` is
 * `at` (ms since the epoch) and `v`, and a frame's id and digest are columns (the digest 32 bytes).
 */
const ddl = (t: Tables) => `
CREATE TABLE IF NOT EXISTS ${t.runs} (
  updated_at bigint NOT NULL,
  run integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  version integer NOT NULL,
  entries integer NOT NULL,
  last_type smallint NOT NULL,
  run_id text NOT NULL UNIQUE,
  watched_until timestamptz
);
CREATE INDEX IF NOT EXISTS loom_runs_id_c ON ${t.runs} (run_id COLLATE "C");
CREATE TABLE IF NOT EXISTS ${t.entryTypes} (code smallint PRIMARY KEY, type text NOT NULL UNIQUE);
INSERT INTO ${t.entryTypes} (code, type)
  VALUES ${Object.entries(TYPE_CODES)
    .map(([type, code]) => `(${code}, '${type}')`)
    .join(", ")}
  ON CONFLICT (code) DO NOTHING;
CREATE TABLE IF NOT EXISTS ${t.entries} (
  at bigint NOT NULL,
  run integer NOT NULL,
  seq integer NOT NULL,
  type smallint NOT NULL,
  v smallint NOT NULL,
  frame text,
  effect text,
  digest bytea,
  data text,
  PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS ${t.blobs} (
  put_at bigint NOT NULL,
  size integer NOT NULL,
  digest bytea PRIMARY KEY,
  bytes bytea NOT NULL
);
CREATE TABLE IF NOT EXISTS ${t.blobRefs} (digest bytea NOT NULL, run integer NOT NULL, PRIMARY KEY (digest, run));
CREATE INDEX IF NOT EXISTS loom_blob_refs_run ON ${t.blobRefs} (run);
CREATE TABLE IF NOT EXISTS ${t.archive} (ref text PRIMARY KEY, run_id text NOT NULL, body text NOT NULL);
CREATE INDEX IF NOT EXISTS loom_archive_run ON ${t.archive} (run_id);
CREATE TABLE IF NOT EXISTS ${t.leases} (
  run_id text PRIMARY KEY,
  loop_id text NOT NULL,
  owner text,
  expires_at timestamptz NOT NULL DEFAULT now(),
  failures integer NOT NULL DEFAULT 0,
  last_error text,
  submitted_at timestamptz NOT NULL DEFAULT now(),
  woken boolean NOT NULL DEFAULT false,
  tenant text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS loom_leases_due ON ${t.leases} (expires_at);
CREATE TABLE IF NOT EXISTS ${t.owners} (
  run_id text PRIMARY KEY,
  token integer NOT NULL,
  owner text,
  host text,
  pid integer,
  expires_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS ${t.cancels} (
  run_id text PRIMARY KEY,
  reason text NOT NULL,
  requested_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS ${t.schedules} (
  schedule_id text PRIMARY KEY,
  cursor_ms bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS ${t.snapshots} (
  seq integer NOT NULL,
  run_id text PRIMARY KEY,
  digest text NOT NULL,
  body text NOT NULL
);
CREATE INDEX IF NOT EXISTS loom_leases_tenant_due ON ${t.leases} (tenant, expires_at);
CREATE TABLE IF NOT EXISTS ${t.tenants} (
  tenant text PRIMARY KEY,
  served_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS ${t.rateLimits} (
  key text PRIMARY KEY,
  requests double precision NOT NULL,
  tokens double precision NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  granted boolean NOT NULL DEFAULT false
);
CREATE OR REPLACE VIEW ${t.journal} AS
  SELECT r.run_id, e.seq, ty.type, ${sqlDataText("encode(e.digest, 'hex')")} AS data,
         '{"v":' || e.v || ',"at":"' || to_char(to_timestamp(e.at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"}' AS meta
    FROM ${t.entries} e JOIN ${t.runs} r ON r.run = e.run JOIN ${t.entryTypes} ty ON ty.code = e.type;
`;

/**
 * Creates the schema and tables if absent and checks the recorded version, in one transaction
 * under an advisory lock, so processes opening the same database at once do not race on DDL.
 */
export async function ensureSchema(
  pool: pg.Pool,
  tables: Tables,
  label: string,
  schema: string | undefined,
): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`loom.schema:${schema ?? ""}`]);
    if (schema !== undefined) await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${tables.meta} (key text PRIMARY KEY, value text NOT NULL)`);
    const found = await client.query<{ value: string }>(`SELECT value FROM ${tables.meta} WHERE key = $1`, [
      "schema_version",
    ]);
    const row = found.rows[0];
    if (row !== undefined && !(Number(row.value) <= POSTGRES_SCHEMA_VERSION)) {
      throw new PostgresSchemaError(
        `${label}: the Loom tables are at schema version ${row.value}, newer than this Loom knows (${POSTGRES_SCHEMA_VERSION}); upgrade Loom to open this database`,
      );
    }
    const version = row === undefined ? undefined : Number(row.value);
    const v1 = version === 1;
    if (v1) await renameV1(client, tables);
    // Version 2 → 3: one nullable column, no rewrite of the table (a catalog change only).
    if (version === 2)
      await client.query(`ALTER TABLE ${tables.runs} ADD COLUMN IF NOT EXISTS watched_until timestamptz`);
    // Version 5 (and older) → 6: the queue's tenant, a column with a constant default (a catalog
    // change only), before the ddl indexes it. Only then: ALTER TABLE takes its lock even when the
    // column exists, and would deadlock with workers claiming meanwhile.
    if (version !== undefined && version < 6) {
      await client.query(
        `ALTER TABLE IF EXISTS ${tables.leases} ADD COLUMN IF NOT EXISTS tenant text NOT NULL DEFAULT ''`,
      );
    }
    await client.query(ddl(tables));
    // Version 3 (and older: their queue is 3's) → 4: one column with a constant default, a catalog
    // change only; the ddl above built the index of run ids (one pass over loom_runs).
    if (version !== undefined && version < 4) {
      await client.query(`ALTER TABLE ${tables.leases} ADD COLUMN IF NOT EXISTS woken boolean NOT NULL DEFAULT false`);
    }
    if (v1) await migrateFromV1(client, tables, label);
    if (version === undefined || version < POSTGRES_SCHEMA_VERSION) {
      await client.query(
        `INSERT INTO ${tables.meta} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
        ["schema_version", String(POSTGRES_SCHEMA_VERSION)],
      );
    }
    await client.query("COMMIT");
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

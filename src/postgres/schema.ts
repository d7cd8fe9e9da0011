import type pg from "pg";
import { sha256Hex } from "../core/digest.ts";
import { PostgresSchemaError } from "./errors.ts";

/** The version of the tables below, recorded in `loom_meta` so a later Loom can migrate. */
export const POSTGRES_SCHEMA_VERSION = 1;

/** Loom's table names, qualified by the schema when one is configured. */
export interface Tables {
  readonly meta: string;
  readonly entries: string;
  /** One row per run: its version (last seq), entry count and last type, locked by each append. */
  readonly streams: string;
  readonly blobs: string;
  readonly archive: string;
  /** The workers' queue: one row per submitted run, with its lease (owner, expiry). */
  readonly leases: string;
  /**
   * The NOTIFY channel that announces due runs: one per schema (a hash of its name, as channel
   * names are identifiers of at most 63 characters), so tenants in other schemas are not woken.
   */
  readonly channel: string;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Table names in `schema` (validated, then quoted: identifiers cannot be query parameters). */
export function tablesIn(schema: string | undefined): Tables {
  if (schema !== undefined && !IDENTIFIER.test(schema)) {
    throw new PostgresSchemaError(
      `postgres schema name ${JSON.stringify(schema)} is not allowed: use letters, digits and _ (not first), at most 63 characters`,
    );
  }
  const q = (name: string) => (schema === undefined ? name : `"${schema}".${name}`);
  return {
    meta: q("loom_meta"),
    entries: q("loom_entries"),
    streams: q("loom_streams"),
    blobs: q("loom_blobs"),
    archive: q("loom_archive"),
    leases: q("loom_leases"),
    channel: `loom_due_${sha256Hex(schema ?? "").slice(0, 16)}`,
  };
}

const ddl = (t: Tables) => `
CREATE TABLE IF NOT EXISTS ${t.meta} (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS ${t.entries} (
  run_id text NOT NULL,
  seq integer NOT NULL,
  type text NOT NULL,
  data text NOT NULL,
  meta text NOT NULL,
  PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS ${t.streams} (
  run_id text PRIMARY KEY,
  version integer NOT NULL,
  entries integer NOT NULL,
  last_type text NOT NULL
);
CREATE TABLE IF NOT EXISTS ${t.blobs} (digest text PRIMARY KEY, size integer NOT NULL, bytes bytea NOT NULL);
CREATE TABLE IF NOT EXISTS ${t.archive} (ref text PRIMARY KEY, run_id text NOT NULL, body text NOT NULL);
CREATE INDEX IF NOT EXISTS loom_archive_run ON ${t.archive} (run_id);
CREATE TABLE IF NOT EXISTS ${t.leases} (
  run_id text PRIMARY KEY,
  loop_id text NOT NULL,
  owner text,
  expires_at timestamptz NOT NULL DEFAULT now(),
  failures integer NOT NULL DEFAULT 0,
  last_error text,
  submitted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS loom_leases_due ON ${t.leases} (expires_at);
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
    await client.query(ddl(tables));
    const found = await client.query<{ value: string }>(`SELECT value FROM ${tables.meta} WHERE key = $1`, [
      "schema_version",
    ]);
    const row = found.rows[0];
    if (row === undefined) {
      await client.query(`INSERT INTO ${tables.meta} (key, value) VALUES ($1, $2)`, [
        "schema_version",
        String(POSTGRES_SCHEMA_VERSION),
      ]);
    } else if (!(Number(row.value) <= POSTGRES_SCHEMA_VERSION)) {
      throw new PostgresSchemaError(
        `${label}: the Loom tables are at schema version ${row.value}, newer than this Loom knows (${POSTGRES_SCHEMA_VERSION}); upgrade Loom to open this database`,
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

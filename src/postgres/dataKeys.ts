import type { DataKeyStore } from "../events/dataKeys.ts";
import type { PgDatabase } from "./database.ts";

/**
 * Data keys (the per-run keys that seal redacted payloads' originals) in the `loom_data_keys`
 * table of the journal's PostgreSQL schema, made at the first use. A deleted key's row is gone;
 * its bytes leave the disk when PostgreSQL vacuums the table, as for any deleted row.
 */
export function postgresDataKeysOn(db: PgDatabase): DataKeyStore {
  const table = db.tables.meta.replace(/loom_meta$/, "loom_data_keys");
  let made: Promise<unknown> | undefined;
  const ready = async () => {
    await db.ready;
    made ??= db.pool
      .query(`CREATE TABLE IF NOT EXISTS ${table} (run_id text PRIMARY KEY, wrapped text NOT NULL)`)
      .catch((e: unknown) => {
        made = undefined; // tried again by the next call (the server was down)
        throw e;
      });
    await made;
  };
  return {
    async put(runId, wrapped) {
      await ready();
      await db.pool.query(`INSERT INTO ${table} (run_id, wrapped) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING`, [
        runId,
        wrapped,
      ]);
      const { rows } = await db.pool.query<{ wrapped: string }>(`SELECT wrapped FROM ${table} WHERE run_id = $1`, [
        runId,
      ]);
      return rows[0]?.wrapped ?? wrapped;
    },
    async get(runId) {
      await ready();
      const { rows } = await db.pool.query<{ wrapped: string }>(`SELECT wrapped FROM ${table} WHERE run_id = $1`, [
        runId,
      ]);
      return rows[0]?.wrapped;
    },
    async delete(runId) {
      await ready();
      const { rowCount } = await db.pool.query(`DELETE FROM ${table} WHERE run_id = $1`, [runId]);
      return (rowCount ?? 0) > 0;
    },
  };
}

import type { SqliteFile } from "./sqlite/sqliteFile.ts";

/**
 * Where a journal keeps the per-run keys that seal the originals of redacted payloads
 * (`withRedaction(journal, r, { keepOriginals })`). A key is stored wrapped (encrypted by the
 * journal's codec), one per run, beside the entries but not among them: entries are never
 * deleted, a key is (`forgetRedactedOriginals`), and without it the originals sealed under it
 * can no longer be opened by anyone.
 */
export interface DataKeyStore {
  /**
   * Keeps `wrapped` as run `runId`'s key unless it has one already; resolves to the one kept (the
   * first writer's, so two writers of a run seal under the same key).
   */
  put(runId: string, wrapped: string): Promise<string>;
  /** The run's wrapped key, or undefined when it has none (never made, or forgotten). */
  get(runId: string): Promise<string | undefined>;
  /** Deletes the run's key; resolves to whether there was one. */
  delete(runId: string): Promise<boolean>;
}

/**
 * Data keys in memory, for tests and for `createJournal` over a memory store.
 *
 * @example
 * const journal = createJournal({ store: memoryStore({ json: true }), dataKeys: memoryDataKeys() });
 */
export function memoryDataKeys(): DataKeyStore {
  const kept = new Map<string, string>();
  return {
    async put(runId, wrapped) {
      const had = kept.get(runId);
      if (had !== undefined) return had;
      kept.set(runId, wrapped);
      return wrapped;
    },
    async get(runId) {
      return kept.get(runId);
    },
    async delete(runId) {
      return kept.delete(runId);
    },
  };
}

/**
 * Data keys in the `loom_data_keys` table of a SQLite file (the journal's own with
 * `openSqliteJournal`), made at the first key kept: a file opened read-only that has none reads as
 * holding no key. A deleted key's row is gone; SQLite may keep its bytes in free pages until the
 * file is vacuumed (`VACUUM`), as for any deleted row.
 */
export function sqliteDataKeysOn(shared: SqliteFile): DataKeyStore {
  const db = shared.db;
  const hasTable = () =>
    db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'loom_data_keys'").get() !== undefined;
  let made = false;
  const make = () => {
    if (made) return;
    db.exec("CREATE TABLE IF NOT EXISTS loom_data_keys (run_id TEXT PRIMARY KEY, wrapped TEXT NOT NULL)");
    made = true;
  };
  return {
    async put(runId, wrapped) {
      make();
      db.prepare("INSERT OR IGNORE INTO loom_data_keys (run_id, wrapped) VALUES (?, ?)").run(runId, wrapped);
      return db.prepare("SELECT wrapped FROM loom_data_keys WHERE run_id = ?").pluck().get(runId) as string;
    },
    async get(runId) {
      if (!made && !hasTable()) return undefined;
      return db.prepare("SELECT wrapped FROM loom_data_keys WHERE run_id = ?").pluck().get(runId) as string | undefined;
    },
    async delete(runId) {
      if (!made && !hasTable()) return false;
      return db.prepare("DELETE FROM loom_data_keys WHERE run_id = ?").run(runId).changes > 0;
    },
  };
}

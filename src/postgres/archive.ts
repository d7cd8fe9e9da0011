import type pg from "pg";
import { sha256Hex } from "../core/digest.ts";
import { IntegrityError } from "../core/errors.ts";
import { refDigest } from "../events/blobs.ts";
import type { ArchivedFrame, ArchiveStore } from "../events/spi.ts";
import { openPgDatabase, type PgDatabase, type PostgresOptions } from "./database.ts";

/**
 * Archived frames (compaction) in the `loom_archive` table of a PostgreSQL database. Each batch is
 * one JSON text under `sha256:<hash of the text>`: a retried compaction writes the same ref, and
 * `get` checks the text against its ref before parsing it (`IntegrityError` when it was altered).
 *
 * @example
 * const journal = createJournal({ store: postgresStore(url), archive: postgresArchive(url) });
 */
export function postgresArchive(target: string | pg.Pool, options?: PostgresOptions): ArchiveStore {
  return postgresArchiveOn(openPgDatabase(target, options));
}

/** The archive on an already opened database. */
export function postgresArchiveOn(shared: PgDatabase): ArchiveStore {
  const db = shared.acquire();
  const { pool, tables } = db;
  const where = `the archive of ${db.label}`;
  return {
    async put(runId, frames) {
      const body = JSON.stringify(frames);
      const ref = `sha256:${sha256Hex(body)}`;
      await db.ready;
      await pool.query(
        `INSERT INTO ${tables.archive} (ref, run_id, body) VALUES ($1, $2, $3) ON CONFLICT (ref) DO NOTHING`,
        [ref, runId, body],
      );
      return { ref };
    },
    async get(ref) {
      const digest = refDigest(ref);
      await db.ready;
      const { rows } = await pool.query<{ body: string }>(`SELECT body FROM ${tables.archive} WHERE ref = $1`, [ref]);
      const body = rows[0]?.body;
      if (body === undefined) {
        throw new IntegrityError(
          `archive batch ${ref} is not in ${where}; a frames.archived marker points at frames that were lost`,
          "archiveMissing",
        );
      }
      if (sha256Hex(body) !== digest) {
        throw new IntegrityError(
          `archive batch ${ref} in ${where} does not match its hash; it was altered: restore it from a backup`,
        );
      }
      return JSON.parse(body) as ArchivedFrame[];
    },
    async close() {
      await db.release();
    },
  };
}

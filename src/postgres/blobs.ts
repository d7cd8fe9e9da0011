import type pg from "pg";
import { sha256Hex } from "../core/digest.ts";
import { refDigest, verified } from "../events/blobs.ts";
import type { BlobRef, BlobStore } from "../events/spi.ts";
import { openPgDatabase, type PgDatabase, type PostgresOptions } from "./database.ts";

/**
 * Blobs (claim-checked tool outputs) in the `loom_blobs` table of a PostgreSQL database: the
 * journal's own with `openPostgresJournal`. Content-addressed (`put` of the same bytes stores them
 * once); `get` verifies the bytes against the ref and throws `IntegrityError` on a mismatch.
 *
 * @example
 * const blobs = postgresBlobStore(process.env.DATABASE_URL!);
 * const { ref } = await blobs.put(new TextEncoder().encode("big output"));
 */
export function postgresBlobStore(target: string | pg.Pool, options?: PostgresOptions): BlobStore {
  return postgresBlobStoreOn(openPgDatabase(target, options));
}

/** The blob store on an already opened database. */
export function postgresBlobStoreOn(shared: PgDatabase): BlobStore {
  const db = shared.acquire();
  const { pool, tables } = db;
  const where = `the blobs of ${db.label}`;
  return {
    async put(bytes) {
      const digest = sha256Hex(bytes);
      await db.ready;
      // A blob put again is marked as put now: pruneRuns never removes one put after its cutoff,
      // so a live run about to record a ref to it keeps it.
      await pool.query(
        `INSERT INTO ${tables.blobs} (put_at, size, digest, bytes) VALUES ($1, $2, $3, $4)
         ON CONFLICT (digest) DO UPDATE SET put_at = EXCLUDED.put_at`,
        [
          Date.now(),
          bytes.byteLength,
          Buffer.from(digest, "hex"),
          Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
        ],
      );
      return { ref: `sha256:${digest}` as BlobRef, size: bytes.byteLength, digest };
    },
    async get(ref) {
      const digest = refDigest(ref);
      await db.ready;
      const { rows } = await pool.query<{ bytes: Buffer }>(`SELECT bytes FROM ${tables.blobs} WHERE digest = $1`, [
        Buffer.from(digest, "hex"),
      ]);
      return verified(ref, digest, rows[0]?.bytes, where);
    },
    async has(ref) {
      const digest = refDigest(ref);
      await db.ready;
      const { rowCount } = await pool.query(`SELECT 1 FROM ${tables.blobs} WHERE digest = $1`, [
        Buffer.from(digest, "hex"),
      ]);
      return rowCount === 1;
    },
    async close() {
      await db.release();
    },
  };
}

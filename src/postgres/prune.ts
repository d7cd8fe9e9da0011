import type { PruneRequest, PruneResult } from "../events/store.ts";
import type { PgDatabase } from "./database.ts";
import { CODE } from "./rows.ts";

/**
 * `pruneRuns` on PostgreSQL. Each batch is one transaction: it locks up to `batchSize` finished
 * runs older than the cutoff (`FOR UPDATE SKIP LOCKED`: a run some writer holds is left for the
 * next prune, and so is one whose ownership is held), deletes their entries, archive batches, queue rows and blob references, then the
 * blobs no remaining run names, then the runs. A session's message is kept while a later message of
 * its session is kept (it holds that message's history). A blob put after the cutoff is kept even when
 * nothing names it yet: a live run may be about to record its ref (`put` marks a blob it finds
 * already stored as put again). Nothing else is locked, so live runs append on meanwhile.
 */
export async function prunePostgres(db: PgDatabase, request: PruneRequest): Promise<PruneResult> {
  const { pool, tables: t } = db;
  const { completedBefore, batchSize, dryRun } = request;
  await db.ready;
  // A run someone still holds (its owner's lease or a worker's, not yet run out) is left for a later
  // prune even when its last entry ends it: its holder may still be writing beside it (a snapshot,
  // a cancel's release) and would find the run gone under it.
  const held = (r: string) =>
    `EXISTS (SELECT 1 FROM ${t.owners} o WHERE o.run_id = ${r}.run_id AND o.owner IS NOT NULL AND o.expires_at > now())
     OR EXISTS (SELECT 1 FROM ${t.leases} l WHERE l.run_id = ${r}.run_id AND l.owner IS NOT NULL AND l.expires_at > now())`;
  const ended = (r: string) =>
    `${r}.last_type IN (${CODE.completed}, ${CODE.failed}, ${CODE.cancelled}) AND ${r}.updated_at < $1::bigint
     AND NOT (${held(r)})`;
  // A session's message (`<sessionId>/<n>`) names the conversation of the message before it instead
  // of copying it: it stays while a later message of its session stays, so no kept run loses its
  // history. The later messages are a range of the "C" index of run ids (`<sessionId>/` up to
  // `<sessionId>0`), their numbers compared as numbers.
  const session = `regexp_replace(r.run_id, '[0-9]+$', '')`;
  const laterKept = `r.run_id ~ '/(0|[1-9][0-9]*)$' AND EXISTS (
       SELECT 1 FROM ${t.runs} s
        WHERE s.run_id COLLATE "C" > ${session} COLLATE "C"
          AND s.run_id COLLATE "C" < regexp_replace(r.run_id, '/[0-9]+$', '0') COLLATE "C"
          AND substring(s.run_id from char_length(${session}) + 1) ~ '^(0|[1-9][0-9]*)$'
          AND substring(s.run_id from char_length(${session}) + 1)::numeric > substring(r.run_id from '([0-9]+)$')::numeric
          AND NOT (${ended("s")}))`;
  const finished = `${ended("r")} AND NOT (${laterKept})`;
  if (dryRun) {
    const { rows } = await pool.query<PruneResult>(
      `WITH gone AS (SELECT r.run, r.run_id, r.entries FROM ${t.runs} r WHERE ${finished})
       SELECT (SELECT count(*)::int FROM gone) AS runs,
              (SELECT coalesce(sum(entries), 0)::int FROM gone) AS entries,
              (SELECT count(*)::int FROM ${t.archive} a JOIN gone USING (run_id)) AS archives,
              (SELECT count(*)::int FROM ${t.blobs} b
                WHERE b.put_at < $1::bigint
                  AND EXISTS (SELECT 1 FROM ${t.blobRefs} x JOIN gone USING (run) WHERE x.digest = b.digest)
                  AND NOT EXISTS (SELECT 1 FROM ${t.blobRefs} x WHERE x.digest = b.digest
                                     AND x.run NOT IN (SELECT run FROM gone))) AS blobs`,
      [completedBefore],
    );
    return rows[0] as PruneResult;
  }
  const total = { runs: 0, entries: 0, blobs: 0, archives: 0 };
  for (;;) {
    const client = await pool.connect();
    let picked = 0;
    try {
      await client.query("BEGIN");
      const batch = await client.query<{ run: number; run_id: string }>(
        `SELECT r.run, r.run_id FROM ${t.runs} r WHERE ${finished}
          ORDER BY r.updated_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
        [completedBefore, batchSize],
      );
      picked = batch.rowCount ?? 0;
      if (picked > 0) {
        const runs = batch.rows.map((r) => r.run);
        const ids = batch.rows.map((r) => r.run_id);
        const entries = await client.query(`DELETE FROM ${t.entries} WHERE run = ANY($1::int[])`, [runs]);
        const archives = await client.query(`DELETE FROM ${t.archive} WHERE run_id = ANY($1::text[])`, [ids]);
        await client.query(`DELETE FROM ${t.leases} WHERE run_id = ANY($1::text[])`, [ids]);
        await client.query(`DELETE FROM ${t.cancels} WHERE run_id = ANY($1::text[])`, [ids]);
        await client.query(`DELETE FROM ${t.snapshots} WHERE run_id = ANY($1::text[])`, [ids]);
        const blobs = await client.query(
          `WITH named AS (DELETE FROM ${t.blobRefs} WHERE run = ANY($1::int[]) RETURNING digest)
           DELETE FROM ${t.blobs} b USING (SELECT DISTINCT digest FROM named) n
            WHERE b.digest = n.digest AND b.put_at < $2::bigint
              AND NOT EXISTS (SELECT 1 FROM ${t.blobRefs} x WHERE x.digest = b.digest AND x.run <> ALL($1::int[]))`,
          [runs, completedBefore],
        );
        await client.query(`DELETE FROM ${t.runs} WHERE run = ANY($1::int[])`, [runs]);
        total.runs += picked;
        total.entries += entries.rowCount ?? 0;
        total.archives += archives.rowCount ?? 0;
        total.blobs += blobs.rowCount ?? 0;
      }
      await client.query("COMMIT");
    } catch (e) {
      await client.query("ROLLBACK").catch(() => {});
      throw e;
    } finally {
      client.release();
    }
    if (picked < batchSize) return total;
  }
}

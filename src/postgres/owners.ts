import type pg from "pg";
import type { RunHolderInfo } from "../core/errors.ts";
import {
  acquisition,
  cancelRefusal,
  checkLeaseMs,
  leaseOf,
  liveHolder,
  lost,
  type OwnerRow,
  stillOwned,
  thisProcess,
} from "../events/ownership.ts";
import type { AcquireOptions, RunLease } from "../events/store.ts";
import type { NewEntry } from "../events/types.ts";
import type { PgDatabase } from "./database.ts";

/**
 * Run ownership on PostgreSQL (`loom_owners`, one row per run ever owned): the EventStore's
 * acquire / renew / release, by the database's clock. The append checks the fence itself, in its
 * own statement (store.ts); `fenceRefusal` only explains a refused append.
 */
export function pgOwners(db: PgDatabase) {
  const { pool, tables: t } = db;
  const columns = `token, owner, host, pid, (extract(epoch FROM expires_at) * 1000)::float8 AS "expiresAt"`;
  // The run's cancel request beside its row (`o`: the owners row), so a lease reports it.
  const withCancel = `${columns}, (SELECT c.reason FROM ${t.cancels} c WHERE c.run_id = o.run_id) AS cancel`;
  const now = `(extract(epoch FROM now()) * 1000)::float8 AS now`;
  const msInterval = "make_interval(secs => $3::double precision / 1000)";

  const rowOf = async (q: pg.Pool | pg.PoolClient, runId: string) =>
    (
      await q.query<OwnerRow & { now: number; cancel: string | null }>(
        `SELECT ${withCancel}, ${now} FROM ${t.owners} o WHERE run_id = $1`,
        [runId],
      )
    ).rows[0];

  // The common case in one statement: a run nobody holds (never owned, released, or its lease ran
  // out by the database's clock) is taken at once, the token moved on. A live holder leaves the
  // row as it is and returns nothing: the locked read below then decides (a holder whose process
  // is gone from this host, or RunBusyError).
  const takeFree = {
    name: `loom-take-free-${t.owners}`,
    text: `INSERT INTO ${t.owners} AS o (run_id, token, owner, host, pid, expires_at)
             VALUES ($1, 1, $2, $4, $5, now() + ${msInterval})
           ON CONFLICT (run_id) DO UPDATE SET token = o.token + 1, owner = $2, host = $4, pid = $5,
                  expires_at = now() + ${msInterval}
            WHERE o.owner IS NULL OR o.expires_at <= now()
           RETURNING ${withCancel}`,
  };

  return {
    async acquire(runId: string, options: AcquireOptions): Promise<RunLease> {
      checkLeaseMs(options.leaseMs);
      await db.ready;
      const free = await pool.query<OwnerRow & { cancel: string | null }>({
        ...takeFree,
        values: [runId, options.owner, options.leaseMs, thisProcess.host, thisProcess.pid],
      });
      if (free.rows[0] !== undefined) return leaseOf(runId, free.rows[0], free.rows[0].cancel);
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        await client.query(
          `INSERT INTO ${t.owners} (run_id, token, expires_at) VALUES ($1, 0, to_timestamp(0)) ON CONFLICT DO NOTHING`,
          [runId],
        );
        const current = (
          await client.query<OwnerRow & { now: number; cancel: string | null }>(
            `SELECT ${withCancel}, ${now} FROM ${t.owners} o WHERE run_id = $1 FOR UPDATE OF o`,
            [runId],
          )
        ).rows[0]!;
        const row = acquisition(runId, current, options, current.now);
        await client.query(
          `UPDATE ${t.owners} SET token = $2, owner = $3, host = $4, pid = $5, expires_at = to_timestamp($6::float8 / 1000)
            WHERE run_id = $1`,
          [runId, row.token, row.owner, row.host, row.pid, row.expiresAt],
        );
        await client.query("COMMIT");
        return leaseOf(runId, row, current.cancel);
      } catch (e) {
        await client.query("ROLLBACK").catch(() => {});
        throw e;
      } finally {
        client.release();
      }
    },

    async renew(lease: RunLease, leaseMs: number): Promise<RunLease> {
      await db.ready;
      const { rows } = await pool.query<OwnerRow & { cancel: string | null }>(
        `UPDATE ${t.owners} o SET expires_at = now() + ${msInterval}
          WHERE run_id = $1 AND token = $2 AND owner IS NOT NULL RETURNING ${withCancel}`,
        [lease.runId, lease.token, leaseMs],
      );
      const row = rows[0];
      if (row === undefined) throw lost(lease.runId, lease.token, await rowOf(pool, lease.runId));
      return leaseOf(lease.runId, row, row.cancel);
    },

    async release(lease: RunLease): Promise<void> {
      await db.ready;
      await pool.query(
        `UPDATE ${t.owners} SET owner = NULL, host = NULL, pid = NULL, expires_at = to_timestamp(0)
          WHERE run_id = $1 AND token = $2`,
        [lease.runId, lease.token],
      );
    },

    /**
     * Why an append of `entries` fenced with `fence` was refused: `OwnershipLostError`,
     * `RunCancelledError`, or undefined if it still owns the run.
     */
    async fenceRefusal(runId: string, fence: number, entries: readonly NewEntry[]) {
      const row = await rowOf(pool, runId);
      if (!stillOwned(row, fence)) return lost(runId, fence, row);
      return cancelRefusal(runId, row?.cancel, entries);
    },

    async holder(runId: string): Promise<RunHolderInfo | undefined> {
      await db.ready;
      const row = await rowOf(pool, runId);
      return row === undefined ? undefined : liveHolder(row, row.now);
    },

    async requestCancel(runId: string, reason: string): Promise<{ holder: RunHolderInfo | undefined }> {
      await db.ready;
      await pool.query(`INSERT INTO ${t.cancels} (run_id, reason) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING`, [
        runId,
        reason,
      ]);
      const row = await rowOf(pool, runId);
      return { holder: row === undefined ? undefined : liveHolder(row, row.now) };
    },
  };
}

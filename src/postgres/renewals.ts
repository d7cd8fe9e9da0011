import { leaseOf, lost, type OwnerRow } from "../events/ownership.ts";
import type { RunLease } from "../events/store.ts";
import type { PgDatabase } from "./database.ts";

/**
 * A worker's lease renewals, batched: every renewal asked for in one turn of the event loop goes
 * out in one statement that extends both the runs' queue rows (`loom_leases`, held by the worker's
 * owner name) and their ownership (`loom_owners`, fenced by each run's token), and reports each
 * run's cancel request. A worker with 10,000 runs in hand renews them all in one round trip per
 * tick (a third of the lease) instead of two statements per run per tick.
 */

/** What a batch says of one run. */
interface Renewed {
  /** The run's ownership as renewed; an `OwnershipLostError` when its token moved on. */
  readonly lease: RunLease | Error;
  /** Whether the worker still holds the run's queue row. */
  readonly queued: boolean;
}

/** Runs renewed per statement at most (a statement with 10,000 array elements is fine; this keeps each short). */
const BATCH = 2000;

/** The batched renewals of one worker (`owner`) on `db`, each extending by `leaseMs`. */
export function batchedRenewals(db: PgDatabase, owner: string, leaseMs: number) {
  const t = db.tables;
  let pending = new Map<string, { token: number; waiters: ((r: Renewed | Error) => void)[] }>();
  let scheduled = false;
  // Never waits on a row lock (SKIP LOCKED): an append fences on the owners row, and a run's last
  // append then takes its queue row and releases the owners row, so a renewal that locked the
  // queue row and then waited for the owners row deadlocked with it. A row matched but locked
  // (the run is being written right now) is `busy`: that run is renewed in the next batch.
  const text = `
    WITH input AS (SELECT * FROM unnest($2::text[], $3::int[]) AS x(run_id, token)),
    ownMatch AS (SELECT o.run_id FROM ${t.owners} o JOIN input i ON o.run_id = i.run_id AND o.token = i.token
                  WHERE o.owner IS NOT NULL),
    ownLocked AS (SELECT o.run_id FROM ${t.owners} o JOIN input i ON o.run_id = i.run_id AND o.token = i.token
                   WHERE o.owner IS NOT NULL ORDER BY o.run_id FOR UPDATE OF o SKIP LOCKED),
    queueMatch AS (SELECT l.run_id FROM ${t.leases} l JOIN input i ON l.run_id = i.run_id WHERE l.owner = $1),
    queueLocked AS (SELECT l.run_id FROM ${t.leases} l JOIN input i ON l.run_id = i.run_id
                     WHERE l.owner = $1 ORDER BY l.run_id FOR UPDATE OF l SKIP LOCKED),
    busy AS ((SELECT run_id FROM ownMatch EXCEPT SELECT run_id FROM ownLocked)
             UNION (SELECT run_id FROM queueMatch EXCEPT SELECT run_id FROM queueLocked)),
    queue AS (
      UPDATE ${t.leases} l SET expires_at = now() + make_interval(secs => $4::double precision / 1000)
        FROM queueLocked k WHERE l.run_id = k.run_id AND k.run_id NOT IN (SELECT run_id FROM busy) RETURNING l.run_id),
    own AS (
      UPDATE ${t.owners} o SET expires_at = now() + make_interval(secs => $4::double precision / 1000)
        FROM ownLocked k WHERE o.run_id = k.run_id AND k.run_id NOT IN (SELECT run_id FROM busy)
      RETURNING o.run_id, o.token, o.owner, o.host, o.pid, (extract(epoch FROM o.expires_at) * 1000)::float8 AS expires,
                (SELECT c.reason FROM ${t.cancels} c WHERE c.run_id = o.run_id) AS cancel)
    SELECT i.run_id, q.run_id IS NOT NULL AS queued, w.token, w.owner, w.host, w.pid, w.expires, w.cancel,
           i.run_id IN (SELECT run_id FROM busy) AS busy
      FROM input i LEFT JOIN queue q ON q.run_id = i.run_id LEFT JOIN own w ON w.run_id = i.run_id`;

  async function send(batch: [string, { token: number; waiters: ((r: Renewed | Error) => void)[] }][]) {
    try {
      await db.ready;
      const { rows } = await db.pool.query<{
        run_id: string;
        queued: boolean;
        token: number | null;
        owner: string | null;
        host: string | null;
        pid: number | null;
        expires: number;
        cancel: string | null;
        busy: boolean;
      }>({
        name: `loom-renew-batch-${t.leases}`,
        text,
        values: [owner, batch.map(([id]) => id), batch.map(([, p]) => p.token), leaseMs],
      });
      const byRun = new Map(rows.map((r) => [r.run_id, r]));
      for (const [runId, { token, waiters }] of batch) {
        const row = byRun.get(runId);
        if (row?.busy) {
          again(runId, token, waiters); // written to right now: renewed in the next batch
          continue;
        }
        const lease =
          row?.token == null
            ? lost(runId, token, undefined)
            : leaseOf(
                runId,
                {
                  token: row.token,
                  owner: row.owner,
                  host: row.host,
                  pid: row.pid,
                  expiresAt: row.expires,
                } as OwnerRow,
                row.cancel,
              );
        for (const w of waiters) w({ lease, queued: row?.queued ?? false });
      }
    } catch (e) {
      for (const [, { waiters }] of batch) for (const w of waiters) w(e as Error);
    }
  }

  /** Puts a busy run's renewal back, for a batch sent shortly. */
  function again(runId: string, token: number, waiters: ((r: Renewed | Error) => void)[]) {
    const entry = pending.get(runId) ?? { token, waiters: [] };
    entry.waiters.push(...waiters);
    pending.set(runId, entry);
    if (!scheduled) {
      scheduled = true;
      setTimeout(flush, 20);
    }
  }

  function flush() {
    scheduled = false;
    const all = [...pending];
    pending = new Map();
    for (let i = 0; i < all.length; i += BATCH) void send(all.slice(i, i + BATCH));
  }

  /** Renews the run's queue row and its ownership (`lease`'s token) in the next batch. */
  function renew(lease: RunLease): Promise<Renewed> {
    return new Promise((resolve, reject) => {
      const entry = pending.get(lease.runId) ?? { token: lease.token, waiters: [] };
      entry.waiters.push((r) => (r instanceof Error ? reject(r) : resolve(r)));
      pending.set(lease.runId, entry);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
  }

  return { renew };
}

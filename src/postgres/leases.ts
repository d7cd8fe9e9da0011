import type { PgDatabase } from "./database.ts";
import { CODE } from "./rows.ts";
import type { Tables } from "./schema.ts";

/**
 * The workers' queue and leases, one row per submitted run in `loom_leases`: a run is due when
 * its `expires_at` has passed (just submitted, released, or its owner's lease ran out). Times are
 * the database's clock (`now()`), so machines with skewed clocks still agree on who holds a run.
 *
 * `woken`: something the run's journal does not show made it worth resuming, namely an approval
 * recorded on one of its sub-agents' runs (the run's own journal still ends approval-pending).
 * The claim takes a woken run though it looks settled, and clears the flag, so a run that only
 * waits again is not claimed again. A worker finishing a run woken meanwhile (the approval came
 * while it ran) hands the row back due at once instead of taking it off the queue.
 */

export interface Claim {
  readonly runId: string;
  readonly loopId: string;
  /** Failed attempts so far (the backoff grows with them). */
  readonly failures: number;
  /** The row was woken (`woken`): resume the run though its journal says it waits. */
  readonly woken?: boolean;
}

const msInterval = (param: string) => `make_interval(secs => ${param}::double precision / 1000)`;

// The run's journal says no worker can take it further: completed, failed or cancelled, or waiting
// for an approval or a higher iteration limit, or past its deadline (those need the caller). `s`:
// its stream, `e`: its last entry. An approval-pending run is settled until one of its approvals
// expires (the interruption journals `detail.expiresAt`, step id → time): then a worker resumes it,
// and the run declines that call.
const expiries = `json_each_text(e.data::json -> 'detail' -> 'expiresAt')`;
// A woken row (`q`) is taken even while it waits for its approvals (not when it ended).
const settledUnless = (
  woken: string,
) => `(s.last_type IN (${CODE.completed}, ${CODE.failed}, ${CODE.cancelled}) OR CASE WHEN s.last_type = ${CODE.interrupted}
    THEN (e.data::json ->> 'reason') IN ('max-iterations', 'deadline') OR ((e.data::json ->> 'reason') IN ('approval-pending', 'waiting')
      AND NOT ${woken} AND NOT EXISTS (SELECT 1 FROM ${expiries} x WHERE x.value::timestamptz <= now())) ELSE false END)`;
const lastEntry = (t: Tables) => `JOIN ${t.entries} e ON e.run = s.run AND e.seq = s.version`;

/**
 * The claim, as common table expressions (`tenantsDue`, `due`, `checked`, `dropped`, `claimed`,
 * `served`) for a statement's WITH: up to $4 due runs of the loops $3, each locked (SKIP LOCKED:
 * concurrent claimers never wait on, nor take, the same row), taken for owner $1 until $2 ms from
 * now. Only those few are looked up in the runs and their last entries: a run that needs no
 * worker (`settled`, or gone) is taken off the queue (as `sweep` does) instead of claimed, so it
 * cannot hold the head of the queue. `claimed` returns the run id, loop id, failures, `run` (the
 * run's key), tenant and `woken` (as it was before the claim cleared it); `dropped` the run ids taken off. A claimed row's `woken` is cleared: the
 * resume it asked for is this one.
 *
 * Fair across tenants (`submitRun({ tenant })`): the tenants with queue rows are listed by a skip
 * scan of the (tenant, expires_at) index (one index probe per tenant, however many runs each has),
 * ordered least recently served first (`loom_tenants`), and each gives at most its share of the
 * claim (⌈$4 / tenants⌉), oldest due first: one tenant's 10,000 runs cannot hold back another's
 * 10, and a claim of one run serves the tenants in turn. The queue is read per tenant up to the
 * share, so a claim costs the same with 10 or 10,000 runs due. `served` stamps the tenants served
 * (in tenant order, so two claimers never wait on each other's rows in opposite orders).
 */
export const claimCtes = (t: Tables) => `
    tenantsDue AS (
      SELECT w.tenant, row_number() OVER (ORDER BY s.served_at NULLS FIRST, w.tenant) AS turn, count(*) OVER () AS n
        FROM (WITH RECURSIVE w(tenant) AS (
                (SELECT tenant FROM ${t.leases} ORDER BY tenant LIMIT 1)
                UNION ALL
                SELECT (SELECT l.tenant FROM ${t.leases} l WHERE l.tenant > w.tenant ORDER BY l.tenant LIMIT 1)
                  FROM w WHERE w.tenant IS NOT NULL)
              SELECT tenant FROM w WHERE tenant IS NOT NULL) w
        LEFT JOIN ${t.tenants} s ON s.tenant = w.tenant),
    due AS (
      SELECT p.run_id, p.woken FROM tenantsDue td CROSS JOIN LATERAL (
          SELECT q.run_id, q.woken FROM ${t.leases} q
           WHERE q.tenant = td.tenant AND q.expires_at <= now() AND q.loop_id = ANY($3::text[])
           ORDER BY q.expires_at LIMIT ceil($4::float8 / td.n)::int FOR UPDATE SKIP LOCKED) p
       ORDER BY td.turn LIMIT $4),
    checked AS (
      SELECT d.run_id, s.run, d.woken, coalesce(${settledUnless("d.woken")}, true) AS settled
        FROM due d LEFT JOIN ${t.runs} s ON s.run_id = d.run_id LEFT ${lastEntry(t)}),
    dropped AS (DELETE FROM ${t.leases} l USING checked c WHERE l.run_id = c.run_id AND c.settled RETURNING l.run_id),
    claimed AS (
      UPDATE ${t.leases} AS l SET owner = $1, expires_at = now() + ${msInterval("$2")}, woken = false
        FROM checked c WHERE l.run_id = c.run_id AND NOT c.settled
      RETURNING l.run_id, l.loop_id, l.failures, c.run, l.tenant, c.woken),
    served AS (
      INSERT INTO ${t.tenants} AS s (tenant) SELECT DISTINCT tenant FROM claimed ORDER BY tenant
      ON CONFLICT (tenant) DO UPDATE SET served_at = now())`;

/**
 * A worker is done with run `id` (SQL, e.g. `$1`), whose queue row `owner` holds: the row is taken
 * off the queue (`finished`), or, when something woke the run while the worker had it (a
 * sub-agent's approval came in), handed back due at once and announced (`handedBack`), so a
 * worker claims it again. Each CTE returns the run id (with `handBackSelect`, one row in all when
 * the owner held the row). `when`: a condition for either; `finishedWhen`: a further one for
 * taking the row off.
 */
export const handBackCtes = (
  t: Tables,
  id: string,
  owner: string,
  { when = "true", finishedWhen = "true" }: { readonly when?: string; readonly finishedWhen?: string } = {},
) => `
    finished AS (DELETE FROM ${t.leases} WHERE run_id = ${id} AND owner = ${owner} AND ${when} AND NOT woken
                  AND ${finishedWhen} RETURNING run_id),
    handedBack AS (UPDATE ${t.leases} SET owner = NULL, expires_at = now(), failures = 0
                    WHERE run_id = ${id} AND owner = ${owner} AND ${when} AND woken RETURNING run_id, loop_id)`;

/**
 * The CTE `queued`: queues run `id` for the workers of loop `loopId` and tenant `tenant` (SQL
 * expressions, parameters mostly), due now, once for each row of `from`: a new queue row, or a row
 * no worker holds made due again (a submitted run's first append, submit.ts).
 */
export const queueCte = (t: Tables, id: string, loopId: string, tenant: string, from: string) => `queued AS (
        INSERT INTO ${t.leases} AS l (run_id, loop_id, tenant) SELECT ${id}, ${loopId}, ${tenant} FROM ${from}
        ON CONFLICT (run_id) DO UPDATE SET expires_at = now(), failures = 0 WHERE l.owner IS NULL)`;

/**
 * Makes run $1 (of loop $2) due for the workers, as an append that wakes it does
 * (`AppendOptions.wake`). `"self"`, the run appended to: due now unless a worker holds it.
 * `"other"` (a sub-agent's top-level run): marked `woken` too, so the claim takes it though its
 * journal ends approval-pending, and a worker holding it hands it back due when done with it.
 */
export const wakeSql = (t: Tables, which: "self" | "other") =>
  which === "self"
    ? `INSERT INTO ${t.leases} AS l (run_id, loop_id) VALUES ($1, $2)
           ON CONFLICT (run_id) DO UPDATE SET expires_at = now(), failures = 0 WHERE l.owner IS NULL`
    : `INSERT INTO ${t.leases} AS l (run_id, loop_id, woken) VALUES ($1, $2, true)
           ON CONFLICT (run_id) DO UPDATE SET woken = true,
             expires_at = CASE WHEN l.owner IS NULL THEN now() ELSE l.expires_at END,
             failures = CASE WHEN l.owner IS NULL THEN 0 ELSE l.failures END`;

/** The rows of `handBackCtes`, the handed back run announced to the workers of its loop. */
export const handBackSelect = (t: Tables) => `SELECT run_id FROM finished
   UNION ALL SELECT run_id FROM (SELECT run_id, pg_notify('${t.channel}', loop_id) FROM handedBack) h`;

/** What a claim took: the runs to work on, and how many runs needing no worker it took off the queue. */
export interface Claimed<C extends Claim = Claim> {
  readonly claims: C[];
  /** Runs at the head of the queue that need no worker, removed: more may be due behind them. */
  readonly dropped: number;
}

/** The lease operations, on one database. Every statement is one round trip and one transaction. */
export function leases(db: PgDatabase) {
  const { pool, tables: t } = db;
  const claimText = `WITH ${claimCtes(t)}
    SELECT run_id, loop_id, failures, woken FROM claimed UNION ALL SELECT run_id, NULL, NULL, NULL FROM dropped`;

  const changed = async (text: string, values: unknown[]) => {
    await db.ready;
    return (await pool.query(text, values)).rowCount === 1;
  };

  return {
    /** Takes up to `limit` due runs for `owner` until `leaseMs` from now (none when none is due). */
    async claim(owner: string, loopIds: readonly string[], leaseMs: number, limit: number): Promise<Claimed> {
      await db.ready;
      const { rows } = await pool.query<{
        run_id: string;
        loop_id: string | null;
        failures: number;
        woken: boolean | null;
      }>({
        name: `loom-claim-${t.leases}`,
        text: claimText,
        values: [owner, leaseMs, loopIds, limit],
      });
      const claims: Claim[] = [];
      for (const row of rows) {
        if (row.loop_id !== null)
          claims.push({ runId: row.run_id, loopId: row.loop_id, failures: row.failures, woken: row.woken === true });
      }
      return { claims, dropped: rows.length - claims.length };
    },
    /**
     * Removes due rows of runs that need no worker: a worker killed after its run's last append
     * but before `finish` leaves one behind.
     */
    async sweep(): Promise<number> {
      await db.ready;
      const { rowCount } = await pool.query(
        `DELETE FROM ${t.leases} l USING ${t.runs} s ${lastEntry(t)}
          WHERE s.run_id = l.run_id AND l.expires_at <= now() AND ${settledUnless("l.woken")}`,
      );
      return rowCount ?? 0;
    },
    /** Extends the lease; false when `owner` no longer holds it (it expired and was taken over). */
    renew: (runId: string, owner: string, leaseMs: number) =>
      changed(`UPDATE ${t.leases} SET expires_at = now() + ${msInterval("$3")} WHERE run_id = $1 AND owner = $2`, [
        runId,
        owner,
        leaseMs,
      ]),
    /**
     * The run needs no worker any more (completed, or waiting for its caller): off the queue,
     * unless it was woken meanwhile (`handBackCtes`).
     */
    finish: (runId: string, owner: string) =>
      changed(`WITH ${handBackCtes(t, "$1", "$2")} ${handBackSelect(t)}`, [runId, owner]),
    /**
     * `finish`, and the run's ownership (the lease `token` fences) released, in one statement: the
     * worker's last round trip for a run that needs it no more.
     */
    finishAndRelease: (runId: string, owner: string, token: number) =>
      changed(
        `WITH ${handBackCtes(t, "$1", "$2")},
              released AS (UPDATE ${t.owners} SET owner = NULL, host = NULL, pid = NULL, expires_at = to_timestamp(0)
                            WHERE run_id = $1 AND token = $3)
         ${handBackSelect(t)}`,
        [runId, owner, token],
      ),
    /**
     * The run waits for approvals: like `finishAndRelease`, unless one of them expires (its
     * interruption journaled when): then the run stays queued, due at the first expiry, when a
     * worker resumes it to decline that call. A run woken meanwhile is handed back due now.
     */
    waitForApproval: (runId: string, owner: string, token: number) =>
      changed(
        `WITH expiry AS (SELECT min(x.value::timestamptz) AS at FROM ${t.runs} s ${lastEntry(t)}, ${expiries} x
                          WHERE s.run_id = $1 AND s.last_type = ${CODE.interrupted}),
              parked AS (UPDATE ${t.leases} SET owner = NULL, expires_at = (SELECT at FROM expiry), failures = 0
                          WHERE run_id = $1 AND owner = $2 AND NOT woken AND (SELECT at FROM expiry) IS NOT NULL
                          RETURNING run_id),
              ${handBackCtes(t, "$1", "$2", { finishedWhen: "(SELECT at FROM expiry) IS NULL" })},
              released AS (UPDATE ${t.owners} SET owner = NULL, host = NULL, pid = NULL, expires_at = to_timestamp(0)
                            WHERE run_id = $1 AND token = $3)
         ${handBackSelect(t)} UNION ALL SELECT run_id FROM parked`,
        [runId, owner, token],
      ),
    /**
     * When run `runId`, stopped by durable waits or approvals (its last entry a `waiting` or
     * `approval-pending` interruption), is due: the first wake, timeout or approval expiry its
     * interruption journaled (ms since the epoch), as the park (`waitForApproval`) reads it;
     * undefined for any other run.
     */
    async waitingDue(runId: string): Promise<number | undefined> {
      await db.ready;
      const { rows } = await pool.query<{ at: number | null }>(
        `SELECT (extract(epoch FROM min(x.value::timestamptz)) * 1000)::float8 AS at
           FROM ${t.runs} s ${lastEntry(t)}, ${expiries} x
          WHERE s.run_id = $1 AND s.last_type = ${CODE.interrupted}
            AND (e.data::json ->> 'reason') IN ('waiting', 'approval-pending')`,
        [runId],
      );
      return rows[0]?.at ?? undefined;
    },
    /** The attempt failed: due again after `delayMs`, with the error kept for operators. */
    retryLater: (runId: string, owner: string, delayMs: number, error: string) =>
      changed(
        `UPDATE ${t.leases} SET owner = NULL, expires_at = now() + ${msInterval("$3")}, failures = failures + 1,
                last_error = $4 WHERE run_id = $1 AND owner = $2`,
        [runId, owner, delayMs, error],
      ),
    /** Another process owns the run (a direct `loop.run`): due again after `delayMs`, not counted as a failure. */
    postpone: (runId: string, owner: string, delayMs: number) =>
      changed(
        `UPDATE ${t.leases} SET owner = NULL, expires_at = now() + ${msInterval("$3")} WHERE run_id = $1 AND owner = $2`,
        [runId, owner, delayMs],
      ),
    /** Hands the run back, due at once (a worker stopping), and tells the listening workers. */
    releaseNow: (runId: string, owner: string) =>
      changed(
        `WITH released AS (UPDATE ${t.leases} SET owner = NULL, expires_at = now() WHERE run_id = $1 AND owner = $2
                            RETURNING loop_id)
         SELECT pg_notify('${t.channel}', loop_id) FROM released`,
        [runId, owner],
      ),
  };
}

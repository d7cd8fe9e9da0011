import { leaseOf, thisProcess } from "../events/ownership.ts";
import type { Journal } from "../events/spi.ts";
import { decodeStoredRows, type StoredRow } from "../events/sqlite/sqliteRows.ts";
import type { AppendOptions, RunLease } from "../events/store.ts";
import type { JournalEntry, NewEntry } from "../events/types.ts";
import type { PgDatabase } from "./database.ts";
import { type Claim, type Claimed, claimCtes } from "./leases.ts";
import { appendFinishing, type PostgresEventStore } from "./store.ts";

/**
 * A worker's fast path on a store Loom made (`ownStore`): claiming a run, taking its ownership and
 * reading its journal are one statement, and the run's last append also takes it off the queue
 * and releases it. So a one-turn run costs the database its claim (shared by the runs claimed
 * together), its appends and nothing else.
 */

/** A claimed run, and when its ownership was free, the lease taken and the journal read with it. */
export interface Pickup extends Claim {
  /** Undefined when another process owns the run: acquire it the ordinary way (or wait). */
  readonly owned?: { readonly lease: RunLease; readonly entries: JournalEntry[] };
}

const ms = (param: string) => `make_interval(secs => ${param}::double precision / 1000)`;

/**
 * Claims up to `limit` due runs (as `leases.claim`), takes the ownership of each nobody holds
 * (as `acquire` does when the run is free: the token moves on) and reads the journal of those,
 * in one statement. Its snapshot is taken when it starts: an append the previous owner (a worker
 * whose lease ran out, still writing) commits while this statement waits for its row is not in
 * the entries read, and the first append at the version read is refused as a `ConcurrencyError`;
 * the run's attempt then fails and is retried, never written twice.
 */
export async function claimOwnRead(
  db: PgDatabase,
  owner: string,
  loopIds: readonly string[],
  leaseMs: number,
  limit: number,
): Promise<Claimed<Pickup>> {
  const t = db.tables;
  await db.ready;
  // The rows: per claimed run its queue row, its ownership (null when another process owns it)
  // and its entries in seq order (each row ending with the queue row's woken); per run taken off the queue one row with a null loop id.
  const { rows } = await db.pool.query<unknown[]>({
    name: `loom-pickup-${t.leases}`,
    text: `
      WITH ${claimCtes(t)},
      owned AS (
        INSERT INTO ${t.owners} AS o (run_id, token, owner, host, pid, expires_at)
        SELECT run_id, 1, $1, $5, $6, now() + ${ms("$2")} FROM claimed
        ON CONFLICT (run_id) DO UPDATE SET token = o.token + 1, owner = EXCLUDED.owner, host = EXCLUDED.host,
               pid = EXCLUDED.pid, expires_at = EXCLUDED.expires_at
         WHERE o.owner IS NULL OR o.expires_at <= now()
        RETURNING o.run_id, o.token, (extract(epoch FROM o.expires_at) * 1000)::float8 AS expires)
      SELECT c.run_id, c.loop_id, c.failures, w.token, w.expires,
             e.seq, e.type, e.at::float8, e.v, e.frame, e.effect, e.digest, e.data, c.woken
        FROM claimed c LEFT JOIN owned w ON w.run_id = c.run_id
        LEFT JOIN ${t.entries} e ON e.run = c.run AND w.token IS NOT NULL
      UNION ALL
      SELECT run_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM dropped
       ORDER BY 1, 6`,
    values: [owner, leaseMs, loopIds, limit, thisProcess.host, thisProcess.pid],
    rowMode: "array",
  });
  const claims: Pickup[] = [];
  let dropped = 0;
  for (let i = 0; i < rows.length; ) {
    const [runId, loopId, failures, token, expires] = rows[i] as [string, string | null, number, number | null, number];
    const woken = (rows[i] as unknown[])[13] === true; // the row's woken, before the claim cleared it
    let end = i;
    while (end < rows.length && (rows[end] as unknown[])[0] === runId) end++;
    if (loopId === null) dropped++;
    else if (token === null) claims.push({ runId, loopId, failures, woken });
    else {
      const lease = leaseOf(runId, { token, owner, host: thisProcess.host, pid: thisProcess.pid, expiresAt: expires });
      const stored = rows
        .slice(i, end)
        .flatMap((row) => (row[5] === null ? [] : [row.slice(5, 13) as unknown as StoredRow]));
      const entries: JournalEntry[] = [];
      decodeStoredRows(runId, stored, entries, db.label);
      claims.push({ runId, loopId, failures, woken, owned: { lease, entries } });
    }
    i = end;
  }
  return { claims, dropped };
}

/** Entries after which a worker has nothing more to do with a run (as the claim's `settled`). */
function finishes(entries: readonly NewEntry[]): boolean {
  const last = entries[entries.length - 1];
  if (last?.type === "run.completed" || last?.type === "run.cancelled" || last?.type === "run.failed") return true;
  if (last?.type !== "run.interrupted") return false;
  const reason = last.data.reason;
  // Approvals that expire keep the run queued, due at the first expiry (the worker parks it: waitForApproval).
  const expires = (last.data.detail as { expiresAt?: Record<string, unknown> } | null)?.expiresAt;
  if (reason === "approval-pending" || reason === "waiting")
    return expires === undefined || Object.keys(expires).length === 0;
  return reason === "max-iterations" || reason === "deadline";
}

/** One picked-up run's state, on its view of the store (`pickedUpJournal`). */
interface PickedUpView extends PostgresEventStore {
  /** The store the view reads and writes through. */
  readonly store: PostgresEventStore;
  readonly runId: string;
  /** The entries the claim read, until the run's first read takes them (or an append makes them stale). */
  primed: JournalEntry[] | undefined;
  readonly queueOwner: string;
  /** Whether the run's last append took it off the queue and released it. */
  finished: boolean;
}

/**
 * The methods a picked-up run's view overrides, made once per store and shared by every run's
 * view as its prototype (whose own prototype is the store): a run's view is then one object of
 * its fields, with no functions of its own (a worker makes thousands of them a second).
 */
const viewPrototypes = new WeakMap<PostgresEventStore, object>();

function viewPrototype(store: PostgresEventStore): object {
  let proto = viewPrototypes.get(store);
  if (proto !== undefined) return proto;
  proto = Object.create(store, {
    read: {
      value(this: PickedUpView, id: string, options?: { from?: number }) {
        if (id === this.runId && this.primed !== undefined && (options?.from ?? 1) <= 1) {
          const out = this.primed;
          this.primed = undefined;
          return Promise.resolve(out);
        }
        return this.store.read(id, options);
      },
    },
    // The claim read every entry already: the resume folds those rather than read a snapshot too.
    latestSnapshot: {
      value(this: PickedUpView, id: string) {
        return id === this.runId && this.primed !== undefined
          ? Promise.resolve(undefined)
          : (this.store.latestSnapshot?.(id) ?? Promise.resolve(undefined));
      },
    },
    append: {
      async value(this: PickedUpView, id: string, added: readonly NewEntry[], options: AppendOptions) {
        this.primed = undefined; // a later read must see what was written
        if (id !== this.runId || options.fence === undefined || !finishes(added))
          return this.store.append(id, added, options);
        const result = await this.store[appendFinishing](id, added, options, this.queueOwner);
        this.finished = true;
        return result;
      },
    },
  }) as object;
  viewPrototypes.set(store, proto);
  return proto;
}

/**
 * The journal one claimed run is resumed with: its first read of the run returns the entries the
 * claim read, and its append of the run's last entries (completed, or waiting for its caller)
 * also finishes the queue row and releases the ownership; `finished` then says so. Everything else
 * goes to the store as it is.
 */
export function pickedUpJournal(
  journal: Journal,
  store: PostgresEventStore,
  runId: string,
  entries: JournalEntry[],
  queueOwner: string,
): PickedUp {
  const view = Object.create(viewPrototype(store)) as { -readonly [K in keyof PickedUpView]: PickedUpView[K] };
  view.store = store;
  view.runId = runId;
  view.primed = entries;
  view.queueOwner = queueOwner;
  view.finished = false;
  return new PickedUp({ ...journal, store: view }, view);
}

/** A picked-up run's journal, and whether its last append finished it (`pickedUpJournal`). */
class PickedUp {
  constructor(
    readonly journal: Journal,
    private readonly view: { readonly finished: boolean },
  ) {}

  /** Whether the run's last append took it off the queue and released it. */
  finished(): boolean {
    return this.view.finished;
  }
}

import pg from "pg";
import { AppendWatchers } from "../events/watch.ts";
import type { PgDatabase } from "./database.ts";

/**
 * Appends, as PostgreSQL announces them: an append statement ends with
 * `pg_notify(<appended channel>, run id)`, sent on commit (so a watcher never reads before the
 * entries are visible), when the run is new or followed: its `loom_runs.watched_until` is in the
 * future. A process that watches a run sets it (a minute ahead, renewed every 20 s while it
 * watches) and only then tells its watchers to read: an append that moved the row before that
 * UPDATE committed is visible to that read, and one that moves it after reads the new
 * `watched_until` and announces itself. A run that has no row yet is registered when its first
 * append (always announced) arrives, before its watchers are told. Runs nobody follows cost no
 * NOTIFY (see store.ts: notifying commits are serialized).
 *
 * One listening connection per database per process, outside the pool, opened on the first watch
 * and ended with the last. After a lost connection it reconnects (100 ms, doubling, at most 5 s),
 * registers the watched runs again and wakes every watcher: what was announced meanwhile is lost.
 */

/** How long a registration lasts, and how often a watching process renews it. */
const WATCH_MS = 60_000;
const RENEW_MS = 20_000;
interface Shared {
  readonly watchers: AppendWatchers;
  /** The watched runs, with how many watchers each. */
  readonly runs: Map<string, number>;
  /** A run newly watched: registered (when connected), then its watchers told. */
  added(runId: string): void;
  stop(): void;
}

const shared = new WeakMap<PgDatabase, Shared>();

/**
 * Calls `onAppend` after each append to run `runId` by any process; returns the removal.
 *
 * @example
 * ```ts
 * const stop = watchAppends(db, "r-1", () => console.log("read again"));
 * ```
 */
export function watchAppends(db: PgDatabase, runId: string, onAppend: () => void): () => void {
  let s = shared.get(db);
  if (s === undefined) {
    s = listen(db);
    shared.set(db, s);
  }
  const current = s;
  const remove = current.watchers.add(runId, onAppend);
  current.runs.set(runId, (current.runs.get(runId) ?? 0) + 1);
  current.added(runId);
  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    remove();
    const n = (current.runs.get(runId) ?? 1) - 1;
    if (n === 0) current.runs.delete(runId);
    else current.runs.set(runId, n);
    if (current.watchers.size === 0 && shared.get(db) === current) {
      shared.delete(db);
      current.stop();
    }
  };
}

function listen(db: PgDatabase): Shared {
  const watchers = new AppendWatchers();
  const runs = new Map<string, number>();
  const channel = db.tables.appended;
  let client: pg.Client | undefined;
  /** LISTEN is in place on `client`: a run watched from now on registers itself. */
  let listening = false;
  let stopped = false;
  let delay = 100;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let renewal: ReturnType<typeof setInterval> | undefined;
  /** Runs whose row carries this process's registration (the others have no row yet). */
  const registered = new Set<string>();

  const retry = () => {
    client = undefined;
    listening = false;
    registered.clear();
    if (renewal !== undefined) clearInterval(renewal);
    renewal = undefined;
    if (stopped || timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, delay);
    delay = Math.min(delay * 2, 5000);
  };

  /** Marks `runIds` followed until a minute from now; resolves with those that have a row. */
  const register = async (c: pg.Client, runIds: readonly string[]): Promise<void> => {
    if (runIds.length === 0) return;
    const { rows } = await c.query<{ run_id: string }>({
      name: `loom-watch-${db.tables.runs}`,
      text: `UPDATE ${db.tables.runs} SET watched_until = greatest(watched_until, now() + make_interval(secs => $2::int / 1000))
              WHERE run_id = ANY($1::text[]) RETURNING run_id`,
      values: [runIds, WATCH_MS],
    });
    for (const row of rows) registered.add(row.run_id);
  };

  /** Registers `runId` if it is not yet, then tells its watchers (all runs' when undefined). */
  const tell = (c: pg.Client, runIds: readonly string[], runId?: string) =>
    register(c, runIds).then(
      () => {
        if (client === c) watchers.notify(runId);
      },
      () => {
        if (client === c) c.end().catch(() => {}); // the "end" handler reconnects and registers again
      },
    );

  async function connect(): Promise<void> {
    const c = new pg.Client(db.pool.options);
    client = c;
    let lost = false;
    const lose = () => {
      if (lost || client !== c) return;
      lost = true;
      c.end().catch(() => {});
      retry();
    };
    c.on("error", lose);
    c.on("end", lose);
    c.on("notification", (n) => {
      const runId = n.payload;
      if (n.channel !== channel || runId === undefined || !runs.has(runId)) return;
      if (registered.has(runId)) watchers.notify(runId);
      else void tell(c, [runId], runId); // its first append: register the run before reading it
    });
    try {
      await db.ready;
      await c.connect();
      await c.query(`LISTEN ${channel}`);
      listening = true;
      await register(c, [...runs.keys()]);
    } catch {
      lose();
      return;
    }
    if (stopped) {
      await c.end().catch(() => {});
      return;
    }
    delay = 100;
    renewal = setInterval(() => void register(c, [...runs.keys()]).catch(lose), RENEW_MS);
    renewal.unref?.();
    watchers.notify(); // listening now: anything appended before (or while away) is read again
  }
  void connect();

  return {
    watchers,
    runs,
    added(runId) {
      const c = client;
      // Not listening yet: `connect` registers every watched run before it tells them.
      if (c !== undefined && listening && !registered.has(runId)) void tell(c, [runId], runId);
    },
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      if (renewal !== undefined) clearInterval(renewal);
      const c = client;
      client = undefined;
      c?.end().catch(() => {});
    },
  };
}

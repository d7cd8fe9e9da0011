import pg from "pg";
import { AppendWatchers } from "../events/watch.ts";
import type { PgDatabase } from "./database.ts";

/**
 * Appends, as PostgreSQL announces them: every append statement ends with
 * `pg_notify(<appended channel>, run id)`, sent on commit (so a watcher never reads before the
 * entries are visible). One listening connection per database per process, outside the pool,
 * opened on the first watch and ended with the last. After a lost connection it reconnects
 * (100 ms, doubling, at most 5 s) and wakes every watcher: what was announced meanwhile is lost.
 */
interface Shared {
  readonly watchers: AppendWatchers;
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
  return () => {
    remove();
    if (current.watchers.size === 0 && shared.get(db) === current) {
      shared.delete(db);
      current.stop();
    }
  };
}

function listen(db: PgDatabase): Shared {
  const watchers = new AppendWatchers();
  const channel = db.tables.appended;
  let client: pg.Client | undefined;
  let stopped = false;
  let delay = 100;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const retry = () => {
    client = undefined;
    if (stopped || timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, delay);
    delay = Math.min(delay * 2, 5000);
  };

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
      if (n.channel === channel && n.payload !== undefined) watchers.notify(n.payload);
    });
    try {
      await db.ready;
      await c.connect();
      await c.query(`LISTEN ${channel}`);
    } catch {
      lose();
      return;
    }
    if (stopped) {
      await c.end().catch(() => {});
      return;
    }
    delay = 100;
    watchers.notify(); // listening now: anything appended before (or while away) is read again
  }
  void connect();

  return {
    watchers,
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      const c = client;
      client = undefined;
      c?.end().catch(() => {});
    },
  };
}

import pg from "pg";
import type { PgDatabase } from "./database.ts";

/**
 * Wake-ups for the workers: a run that becomes due (submitted, handed back) is announced with
 * `pg_notify` in the transaction that queues it, so the announcement goes out on commit, and a
 * worker that listens claims it at once instead of at its next poll. Polling stays as the
 * fallback: a lease that runs out (a killed worker) or a retry whose backoff ends is announced by
 * nobody, and a notification sent while the listener was reconnecting is lost.
 */

/** `SELECT pg_notify(channel, loopId)` inside the caller's transaction, for `channel` see `Tables`. */
export const notifyDue = (db: PgDatabase) => `SELECT pg_notify('${db.tables.channel}', $1::text)`;

export interface DueListener {
  /** Stops listening; the last subscriber's stop ends the listening connection. */
  stop(): Promise<void>;
}

interface Subscriber {
  /** A run of `loopId` became due. */
  readonly due: (loopId: string) => void;
  /** The listener (re)connected: anything announced while it was away was missed. */
  readonly connected: () => void;
  /** The listening connection failed (it reconnects with a growing delay). */
  readonly failed: (error: unknown) => void;
}

const listeners = new WeakMap<PgDatabase, { readonly subscribers: Set<Subscriber>; stop(): Promise<void> }>();

/**
 * Subscribes to the database's due runs. One listening connection per database per process,
 * outside the pool (it stays open, so it must not hold one of the pool's bounded slots), opened
 * with the pool's own settings; after an outage it reconnects, waiting 100 ms, doubling, at most 5 s.
 */
export function listenForDue(db: PgDatabase, subscriber: Subscriber): DueListener {
  let shared = listeners.get(db);
  if (shared === undefined) {
    shared = openListener(db);
    listeners.set(db, shared);
  }
  const { subscribers } = shared;
  subscribers.add(subscriber);
  const current = shared;
  return {
    async stop() {
      if (!subscribers.delete(subscriber) || subscribers.size > 0) return;
      listeners.delete(db);
      await current.stop();
    },
  };
}

function openListener(db: PgDatabase) {
  const subscribers = new Set<Subscriber>();
  let client: pg.Client | undefined;
  let stopped = false;
  let delay = 100;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const each = (fn: (s: Subscriber) => void) => {
    for (const s of subscribers) fn(s);
  };

  const retry = (error: unknown) => {
    client = undefined;
    if (stopped || timer !== undefined) return;
    each((s) => s.failed(error));
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, delay);
    timer.unref?.();
    delay = Math.min(delay * 2, 5000);
  };

  async function connect(): Promise<void> {
    const c = new pg.Client(db.pool.options);
    client = c;
    let lost = false;
    const lose = (e: unknown) => {
      if (lost || client !== c) return;
      lost = true;
      c.end().catch(() => {});
      retry(e);
    };
    c.on("error", lose);
    c.on("end", () => lose(new Error(`the listening connection to ${db.label} ended`)));
    c.on("notification", (n) => {
      if (n.channel === db.tables.channel) each((s) => s.due(n.payload ?? ""));
    });
    try {
      await db.ready;
      await c.connect();
      await c.query(`LISTEN ${db.tables.channel}`);
    } catch (e) {
      lose(e);
      return;
    }
    if (stopped) {
      await c.end().catch(() => {});
      return;
    }
    delay = 100;
    each((s) => s.connected());
  }
  void connect();

  return {
    subscribers,
    async stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}

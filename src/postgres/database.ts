import pg from "pg";
import { isPostgresSchemaError } from "./errors.ts";
import { ensureSchema, type Tables, tablesIn } from "./schema.ts";

/**
 * The PostgreSQL database a journal lives in: one pool shared by the store, the blobs, the
 * archive and the workers' leases. Each holder acquires it; the last release ends the pool when
 * Loom created it (a pool passed in is the caller's and is never ended).
 */

export interface PostgresOptions {
  /**
   * The schema that holds Loom's tables (created if absent). Default: none, so the tables go
   * where the connection's `search_path` puts them (usually `public`). Letters, digits and `_`.
   */
  readonly schema?: string;
  /**
   * Settings for the pool Loom creates from a URL (ignored when a pool is passed). The pool is
   * bounded: `max` connections (default 10), and requests beyond it wait their turn, so a process
   * never opens more than `max` connections however many runs it has in hand. A worker needs no
   * connection per run: a run holds one only for a statement at a time, and the appends of many
   * runs share one statement (appendBatch.ts), so the default carried 2,000 runs in flight in
   * `bench/inflight.ts`. A larger pool helps a worker whose statements wait for a connection.
   */
  readonly pool?: Omit<pg.PoolConfig, "connectionString">;
}

export interface PgDatabase {
  readonly pool: pg.Pool;
  readonly tables: Tables;
  /** Where it is, for messages: host, database and schema, never a password. */
  readonly label: string;
  /**
   * Settles once the schema is created and its version checked; every operation awaits it. A
   * failed attempt (the server was down) is tried again by the next operation that reads `ready`,
   * so a process started before its database recovers with it.
   */
  readonly ready: Promise<void>;
  /** Counts one more holder. */
  acquire(): PgDatabase;
  /** One holder is done; the last one ends the pool (unless the caller passed it). */
  release(): Promise<void>;
}

/** Where a postgres store says which database it lives in (workers and submitRun use it). */
export const pgDatabaseOf: unique symbol = Symbol("loom.pgDatabase");

/**
 * Opens (or adopts) a pool and starts creating the schema at once. The factory stays synchronous
 * like its SQLite siblings: a failure (server down, newer schema) rejects `ready`, hence the
 * first operation.
 */
export function openPgDatabase(target: string | pg.Pool, options: PostgresOptions = {}): PgDatabase {
  const tables = tablesIn(options.schema);
  const external = typeof target !== "string";
  const pool = external ? target : new pg.Pool({ ...options.pool, connectionString: target });
  // An idle client's error (a server restart) must not crash the process: the pool replaces it.
  if (!external) pool.on("error", () => {});
  const label = `${external ? "the given pool" : where(target)}${options.schema ? ` schema ${options.schema}` : ""}`;
  let failed = false;
  const attempt = () => {
    const p = ensureSchema(pool, tables, label, options.schema);
    // Surfaced by the operation that awaits it. A connection failure is tried again by the next
    // read of `ready`; a schema this Loom cannot use stays refused.
    p.catch((e: unknown) => {
      failed = !isPostgresSchemaError(e);
    });
    return p;
  };
  let ready = attempt();
  let holders = 0;
  let ended = false;
  const db: PgDatabase = {
    pool,
    tables,
    label,
    get ready() {
      if (failed && !ended) {
        failed = false;
        ready = attempt();
      }
      return ready;
    },
    acquire() {
      holders++;
      return db;
    },
    async release() {
      holders--;
      if (holders === 0 && !external && !ended) {
        ended = true;
        await ready.catch(() => {});
        await pool.end();
      }
    },
  };
  return db;
}

function where(url: string): string {
  try {
    const u = new URL(url);
    return `postgres ${u.host}${u.pathname}`;
  } catch {
    return "postgres (unparsable URL)";
  }
}

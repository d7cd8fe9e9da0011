import { createRequire } from "node:module";
import { resolve } from "node:path";
import { Worker } from "node:worker_threads";
import type Database from "better-sqlite3";

/**
 * Checkpoints of a journal file's write-ahead log on a worker thread, for a file Loom opened at
 * `synchronous: "normal"`.
 *
 * SQLite copies the WAL back into the database file (a checkpoint) inside the commit that takes
 * the WAL past 1,000 pages, so one append in a few hundred stops its run for the copy and two
 * fsyncs: at `normal`, the largest wait an append has, about a quarter of the wall time of writing
 * a run's rows (bench/loop). Here the appending connection leaves that to a second connection on
 * a worker thread, which checkpoints (`PASSIVE`: it never blocks a writer or a reader) each time
 * the appends have written about {@link CHECKPOINT_PAGES} pages (as {@link walPages} counts
 * them), and again every {@link RETRY_MS} ms until it has copied the whole WAL (at most
 * {@link MAX_RETRIES} times in a row); SQLite then starts the WAL over at the next commit. A run
 * that appends without a pause leaves the worker no such moment: the appending connection then
 * checkpoints inline once the WAL reaches {@link INLINE_LIMIT_PAGES} pages, as SQLite does by
 * default at 1,000, so the WAL stays bounded.
 *
 * Nothing about durability changes: a checkpoint only copies what is committed, and SQLite
 * serializes it with every other connection's. The worker starts with the first checkpoint the
 * file needs (a short-lived reader or a small run never starts one), does not keep the process
 * alive, and is closed with the store, before the file's last connection, which checkpoints and
 * removes the WAL as it did. If it cannot start or its checkpoint fails, the appending connection
 * checkpoints inline again, as SQLite does by default; nothing of it ever fails an append. Writes
 * of the blob store and the archive are not counted: the inline limit bounds the WAL there too.
 *
 * @example
 * ```ts
 * const checkpoints = walCheckpointer(db, "normal"); // undefined unless a WAL file opened at normal
 * checkpoints?.wrote(3); // after a commit that wrote about 3 pages
 * await checkpoints?.close(); // before the connection closes
 * ```
 */

/** Pages written to the WAL between two checkpoint requests: SQLite's own auto-checkpoint size. */
export const CHECKPOINT_PAGES = 1000;

/** WAL pages past which the appending connection checkpoints inline (the worker found no pause). */
export const INLINE_LIMIT_PAGES = 4 * CHECKPOINT_PAGES;

/** How long the worker waits before it checkpoints again, while the WAL is not copied whole. */
export const RETRY_MS = 20;

/**
 * How many times in a row the worker checkpoints again without copying the WAL whole before it
 * waits for the next request (a reader in another process may hold an old snapshot for long).
 */
export const MAX_RETRIES = 50;

/** What one of the worker's checkpoints did (`PRAGMA wal_checkpoint`'s row). */
export interface CheckpointResult {
  /** 1 when another connection's checkpoint held the file (nothing was copied). */
  readonly busy: number;
  /** Pages in the WAL. */
  readonly log: number;
  /** Pages of it copied into the database file. */
  readonly checkpointed: number;
}

export interface WalCheckpointer {
  /** A commit of the appending connection wrote about `pages` pages to the WAL. */
  wrote(pages: number): void;
  /**
   * Waits for a checkpoint of this file in progress and closes the file's connection in the
   * worker (the worker itself stays, for other files); after it, `wrote` asks for nothing.
   */
  close(): Promise<void>;
  /** What it has done: checkpoints asked and finished, the last one's result, why it stopped. */
  readonly stats: {
    readonly requests: number;
    readonly checkpoints: number;
    readonly last: CheckpointResult | undefined;
    /** Set when the worker could not start or failed: the connection checkpoints inline since. */
    readonly failed: string | undefined;
  };
}

/**
 * The worker's code (CommonJS, run with `eval`): a connection per file, each of which only ever
 * checkpoints. Messages in: `{ op: "checkpoint", id, path }`, `{ op: "close", id }`. Out: each
 * checkpoint's result `{ id, row }`, `{ id, error }` (that file's connection is closed, and it is
 * not checkpointed again), `{ id, closed: true }`.
 */
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const files = new Map();
const close = (file) => {
  files.delete(file.id);
  if (file.timer !== undefined) clearTimeout(file.timer);
  if (file.db !== undefined) file.db.close();
};
const checkpoint = (file) => {
  file.timer = undefined;
  let row;
  try {
    if (file.db === undefined) {
      const Database = require(workerData.driver);
      file.db = new Database(file.path, { fileMustExist: true, timeout: 0 });
      file.db.pragma("synchronous = NORMAL");
      file.db.pragma("wal_autocheckpoint = 0");
    }
    row = file.db.pragma("wal_checkpoint(PASSIVE)")[0];
  } catch (e) {
    try { close(file); } catch {}
    return parentPort.postMessage({ id: file.id, error: String((e && e.message) || e) });
  }
  parentPort.postMessage({ id: file.id, row });
  if ((row.busy !== 0 || row.checkpointed < row.log) && file.retries++ < workerData.maxRetries)
    file.timer = setTimeout(checkpoint, workerData.retryMs, file);
};
parentPort.on("message", (m) => {
  const file = files.get(m.id);
  if (m.op === "close") {
    try {
      if (file !== undefined) close(file);
    } finally {
      parentPort.postMessage({ id: m.id, closed: true });
    }
    return;
  }
  let asked = file;
  if (asked === undefined) {
    asked = { id: m.id, path: m.path, db: undefined, timer: undefined, retries: 0 };
    files.set(m.id, asked);
  } else if (asked.timer !== undefined) clearTimeout(asked.timer);
  asked.retries = 0;
  checkpoint(asked);
});
`;

/**
 * About how many pages a commit of these rows adds to the WAL (a little more, rather than less):
 * the table's and its key's pages, and a page a row and 2 kB of its text (measured: 2.1 frames a
 * commit of one 200-byte row, 3 of 2 kB, 4 of 3 kB, 5 of 8 kB).
 *
 * @example
 * walPages(['{"a":1}', "x".repeat(3000)]); // 5
 */
export function walPages(texts: readonly string[]): number {
  let pages = 2;
  for (let i = 0; i < texts.length; i++) pages += ((texts[i] as string).length + 2047) >> 11;
  return pages;
}

const require = createRequire(import.meta.url);

/** Each connection's checkpointer, for tests and diagnostics. */
const byConnection = new WeakMap<Database.Database, WalCheckpointer>();

/**
 * What the worker has done for a connection (see {@link WalCheckpointer.stats}), or undefined when
 * the connection has no checkpointer.
 * @internal
 */
export function checkpointStatsOf(db: Database.Database): WalCheckpointer["stats"] | undefined {
  return byConnection.get(db)?.stats;
}

/** What the process's one checkpoint worker tells the file it checkpoints. */
interface Listener {
  row(result: CheckpointResult): void;
  error(why: string): void;
  closed(): void;
}

/**
 * The process's checkpoint worker, shared by every file that needs one (started with the first,
 * kept for the next: it does not keep the process alive while no file waits on it).
 */
let shared: { worker: Worker; files: Map<number, Listener>; closing: number } | undefined;
let nextId = 1;

function sharedWorker(driver: string): NonNullable<typeof shared> {
  if (shared !== undefined) return shared;
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: { driver, retryMs: RETRY_MS, maxRetries: MAX_RETRIES },
    // The worker needs none of the process's loaders or flags (tsx, --cpu-prof…).
    execArgv: [],
  });
  const files = new Map<number, Listener>();
  const state = { worker, files, closing: 0 };
  worker.on("message", (m: { id: number; row?: CheckpointResult; error?: string; closed?: true }) => {
    const file = files.get(m.id);
    if (file === undefined) return;
    if (m.row !== undefined) file.row(m.row);
    else if (m.error !== undefined) file.error(`the checkpoint worker failed: ${m.error}`);
    else if (m.closed) file.closed();
  });
  const gone = (why: string) => {
    if (shared === state) shared = undefined;
    for (const file of files.values()) {
      file.error(why);
      file.closed();
    }
    files.clear();
  };
  worker.on("error", (e) => gone(`the checkpoint worker failed: ${e.message}`));
  worker.on("exit", () => gone("the checkpoint worker ended"));
  // After the listeners: adding a "message" listener refs the worker again.
  worker.unref();
  shared = state;
  return state;
}

/**
 * The checkpointer of a WAL file Loom opened at `synchronous: "normal"` by path, or undefined
 * for any other (`full`, whose commits fsync anyway and whose inline checkpoint keeps the WAL
 * short; a database handed in, whose settings are the caller's; in-memory or read-only).
 */
export function walCheckpointer(
  db: Database.Database,
  synchronous: "full" | "normal" | undefined,
  options: {
    /** Pages between two checkpoint requests (tests lower it). */
    readonly pages?: number;
  } = {},
): WalCheckpointer | undefined {
  if (synchronous !== "normal" || db.memory || db.readonly) return undefined;
  if (db.pragma("journal_mode", { simple: true }) !== "wal") return undefined;
  const pages = options.pages ?? CHECKPOINT_PAGES;
  const inline = (limit: number) => db.pragma(`wal_autocheckpoint = ${limit}`);
  inline(Math.max(INLINE_LIMIT_PAGES, 4 * pages));
  const id = nextId++;
  // Resolved now: the worker opens it later, maybe after the process changed its directory.
  const path = resolve(db.name);
  let worker: NonNullable<typeof shared> | undefined;
  let closed: (() => void) | undefined;
  let written = 0;
  const stats = {
    requests: 0,
    checkpoints: 0,
    last: undefined as CheckpointResult | undefined,
    failed: undefined as string | undefined,
  };
  const listener: Listener = {
    row(result) {
      stats.checkpoints++;
      stats.last = result;
    },
    // Back to SQLite's own inline checkpoints: the worker no longer checkpoints this file.
    error(why) {
      if (stats.failed !== undefined) return;
      stats.failed = `${path}: ${why}`;
      try {
        if (db.open) inline(CHECKPOINT_PAGES);
      } catch {
        // The connection is closing: it checkpoints as it closes.
      }
    },
    closed() {
      closed?.();
    },
  };
  let ended = false;
  const checkpointer: WalCheckpointer = {
    stats,
    // Never throws: it runs after the append committed, which must not be reported as failed.
    wrote(n: number) {
      written += n;
      if (written < pages || ended || stats.failed !== undefined) return;
      written = 0;
      try {
        if (worker === undefined) {
          const w = sharedWorker(require.resolve("better-sqlite3"));
          w.files.set(id, listener);
          worker = w;
        }
        worker.worker.postMessage({ op: "checkpoint", id, path });
        stats.requests++;
      } catch (e) {
        listener.error(`the checkpoint worker cannot start (${(e as Error).message})`);
      }
    },
    async close() {
      ended = true; // an append that races the close asks for no checkpoint (nor a connection) more
      const w = worker;
      if (w === undefined || !w.files.has(id)) return;
      worker = undefined;
      // This process waits for the worker while a file's connection there is being closed.
      if (w.closing++ === 0) w.worker.ref();
      await new Promise<void>((done) => {
        closed = done;
        w.worker.postMessage({ op: "close", id });
      });
      w.files.delete(id);
      if (--w.closing === 0) w.worker.unref();
    },
  };
  byConnection.set(db, checkpointer);
  return checkpointer;
}

import type Database from "better-sqlite3";
import { AppendWatchers } from "../watch.ts";
import { type SqliteFile, sqliteDriver } from "./sqliteFile.ts";

/** How often a watched SQLite file is asked whether another connection committed, in ms. */
export const SQLITE_WATCH_POLL_MS = 20;

interface Poller {
  readonly watchers: AppendWatchers;
  stop(): void;
}

const pollers = new WeakMap<SqliteFile, Poller>();

/**
 * Watches the runs of a SQLite file for appends made by any process: a second, read-only
 * connection asks `PRAGMA data_version` (which moves when another connection commits; a few
 * microseconds, no table read) every {@link SQLITE_WATCH_POLL_MS} ms while someone watches,
 * and wakes every watcher of the file when it moved (they read their run from their cursor, an
 * indexed range). One poller per file per process; it stops with its last watcher. Appends
 * through this store also tell their run's watchers at once (`tell`).
 */
export function sqliteWatch(file: SqliteFile): {
  watch(runId: string, onAppend: () => void): () => void;
  tell(runId: string): void;
} {
  const poller = () => {
    let p = pollers.get(file);
    if (p === undefined) {
      p = startPoller(file);
      pollers.set(file, p);
    }
    return p;
  };
  return {
    watch(runId, onAppend) {
      const p = poller();
      const stop = p.watchers.add(runId, onAppend);
      return () => {
        stop();
        if (p.watchers.size === 0 && pollers.get(file) === p) {
          pollers.delete(file);
          p.stop();
        }
      };
    },
    tell(runId) {
      pollers.get(file)?.watchers.notify(runId);
    },
  };
}

function startPoller(file: SqliteFile): Poller {
  const watchers = new AppendWatchers();
  const path = file.db.name;
  let reader: Database.Database | undefined;
  // A file on disk: another connection sees every process's commits. An in-memory database has
  // no other connection: only this store's own appends wake its watchers.
  if (path !== ":memory:" && path !== "" && !file.db.memory) {
    try {
      reader = new (sqliteDriver())(path, { readonly: true, fileMustExist: true });
    } catch {
      reader = undefined;
    }
  }
  const version = reader?.prepare("PRAGMA data_version").pluck();
  let last = version?.get();
  const timer =
    version === undefined
      ? undefined
      : setInterval(() => {
          try {
            const now = version.get();
            if (now === last) return;
            last = now;
          } catch {
            return; // the file is busy or gone: asked again at the next tick
          }
          watchers.notify();
        }, SQLITE_WATCH_POLL_MS);
  return {
    watchers,
    stop() {
      if (timer !== undefined) clearInterval(timer);
      reader?.close();
    },
  };
}

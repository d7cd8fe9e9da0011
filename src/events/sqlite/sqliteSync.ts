import { closeSync, fdatasync, openSync } from "node:fs";
import type Database from "better-sqlite3";
import { JournalFileError } from "./sqliteOpen.ts";

/**
 * Appends written now and fsynced in the background (`AppendOptions.durability: "written"`), for a
 * file Loom opened at `synchronous: "full"`.
 *
 * Such an append commits with `synchronous = NORMAL` (the WAL frames are written to the OS, so a
 * crash of the process keeps them, but not yet flushed), then the WAL file is `fdatasync`ed on
 * libuv's thread pool while the caller goes on (`FLUSH_DELAY_MS` later, unless a FULL commit
 * flushed it first). Every other write of the connection still
 * commits at FULL, whose fsync of the WAL flushes whatever an earlier relaxed commit wrote before
 * it: WAL frames are appended in commit order, so an append that returns at FULL is durable with
 * everything before it. A relaxed commit is therefore durable once its own background flush ends,
 * or once any later FULL commit returns, whichever comes first.
 *
 * A flush that fails (`EIO`, `ENOSPC`…) leaves what the OS kept unknown (a failed fsync may have
 * dropped the dirty pages), so it is final: every later append of the store throws
 * `JournalFileError` `journalNotDurable`, and the run stops there instead of building on entries
 * a power loss could take back.
 */
/**
 * How long a relaxed commit waits for the next FULL commit to flush it with its own, before it is
 * flushed alone: a run's next durable append usually follows within a fraction of a millisecond
 * (the model answered at once), and then one fsync serves both; a slow model call leaves it to
 * the background flush, 2 ms later. Group commit, as PostgreSQL's `commit_delay`.
 */
export const FLUSH_DELAY_MS = 2;

export interface WalSync {
  /** Runs `commit` (one write transaction) without its fsync and flushes the WAL in the background. */
  relaxed<T>(commit: () => T): T;
  /** A FULL commit of the connection just returned: it flushed every relaxed commit before it. */
  covered(): void;
  /** Throws the failure of an earlier background flush, if one failed, naming run `runId` (the append refused). */
  check(runId: string): void;
  /** Waits for the background flush, if one is running, and closes the WAL's descriptor. */
  close(): Promise<void>;
}

/**
 * The background flusher of a file opened at `synchronous: "full"` by path, or undefined where a
 * relaxed commit would not be as safe (a database handed in, whose settings are the caller's; an
 * in-memory database; a file opened at `normal`, which never fsyncs its commits anyway).
 */
export function walSync(
  db: Database.Database,
  synchronous: "full" | "normal" | undefined,
  options: {
    /** How long a relaxed commit may wait for a FULL one to flush it, before it is flushed alone (ms). */
    readonly delayMs?: number;
    /** The flush (tests fail it): fdatasync on libuv's thread pool. */
    readonly flushFile?: (fd: number, done: (e: NodeJS.ErrnoException | null) => void) => void;
  } = {},
): WalSync | undefined {
  if (synchronous !== "full" || db.memory || db.readonly) return undefined;
  const { delayMs = FLUSH_DELAY_MS, flushFile = fdatasync } = options;
  // Not prepared statements: SQLite applies `PRAGMA synchronous = …` when it compiles one, not
  // when it runs, so a statement prepared once would set the level once.
  const setLevel = (level: "NORMAL" | "FULL") => db.exec(`PRAGMA synchronous = ${level}`);
  const path = `${db.name}-wal`;
  let fd: number | undefined;
  /** A relaxed commit is not flushed yet, nor covered by a FULL commit after it. */
  let dirty = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let failed: JournalFileError | undefined;

  const flushOnce = () =>
    new Promise<void>((resolve) => {
      flushFile(fd as number, (e) => {
        if (e && failed === undefined) {
          failed = new JournalFileError(
            "journalNotDurable",
            db.name,
            `${db.name}: flushing the journal's write-ahead log to disk failed (${e.code ?? e.message}); the latest appends may not survive a power loss, so this handle appends nothing more. Check the disk (space, errors), then reopen the journal and resume the run`,
            { cause: e },
          );
        }
        resolve();
      });
    });

  /** Flushes until no relaxed commit is left unflushed (one that came in during a flush needs another). */
  const start = () => {
    timer = undefined;
    running = (async () => {
      while (dirty && failed === undefined) {
        dirty = false;
        await flushOnce();
      }
      running = undefined;
    })();
  };

  return {
    relaxed<T>(commit: () => T): T {
      // The WAL exists once the connection has read or written in WAL mode; its descriptor stays
      // valid while this connection is open (SQLite deletes the WAL only when the last one closes).
      if (fd === undefined) {
        try {
          fd = openSync(path, "r");
        } catch {
          return commit(); // no WAL file to flush: commit at FULL, as without this
        }
      }
      setLevel("NORMAL");
      let result: T;
      try {
        result = commit();
      } finally {
        setLevel("FULL");
      }
      dirty = true;
      if (running === undefined && timer === undefined) {
        if (delayMs <= 0) start();
        else timer = setTimeout(start, delayMs).unref();
      }
      return result;
    },
    covered() {
      dirty = false;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
    check(runId: string) {
      if (failed !== undefined) {
        throw new JournalFileError("journalNotDurable", db.name, `run ${runId}: ${failed.message}`, {
          cause: failed.cause,
        });
      }
    },
    async close() {
      if (timer !== undefined) {
        clearTimeout(timer);
        start(); // what waited for the delay is flushed now
      }
      while (running !== undefined) await running;
      if (fd !== undefined) {
        closeSync(fd);
        fd = undefined;
      }
    },
  };
}

/**
 * How bench/vs-langgraph.ts measures a SQLite file, the same way for Loom's journal and for
 * LangGraph's SqliteSaver file, after the writer closed it:
 *
 * - `rows`: the bytes of every row of every table, as SQLite stores them (the record payload of
 *   the table b-trees, read from the `dbstat` virtual table: column values plus SQLite's record
 *   header, overflow pages included). No index, no free space, no page slack: the data itself.
 * - `index`: the same for the index b-trees (Loom's UNIQUE (run, seq); LangGraph's primary keys).
 * - `file`: the size of a `VACUUM INTO` copy, after `PRAGMA wal_checkpoint(TRUNCATE)` folded the
 *   WAL into the file: every page the data needs (tables, indexes, page slack, the schema), no
 *   free pages, no WAL.
 */
import { rmSync, statSync } from "node:fs";
import Database from "better-sqlite3";

export interface Storage {
  readonly rows: number;
  readonly index: number;
  readonly file: number;
}

export function measureSqlite(path: string): Storage {
  const db = new Database(path);
  try {
    db.pragma("wal_checkpoint(TRUNCATE)");
    const sums = db
      .prepare(
        `SELECT coalesce(sum(CASE WHEN m.type = 'index' THEN 0 ELSE s.payload END), 0) AS rows,
                coalesce(sum(CASE WHEN m.type = 'index' THEN s.payload ELSE 0 END), 0) AS idx
           FROM dbstat s JOIN sqlite_schema m ON m.name = s.name`,
      )
      .get() as { rows: number; idx: number };
    const copy = `${path}.vacuumed`;
    rmSync(copy, { force: true });
    db.prepare("VACUUM INTO ?").run(copy);
    const file = statSync(copy).size;
    rmSync(copy, { force: true });
    return { rows: sums.rows, index: sums.idx, file };
  } finally {
    db.close();
  }
}

/** The record payload of one table (dbstat), for the byte breakdown. */
export function tablePayload(db: Database.Database, name: string): number {
  return (db.prepare("SELECT coalesce(sum(payload), 0) FROM dbstat WHERE name = ?").pluck().get(name) as number) ?? 0;
}

import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { isJournalFileError, type OpenJournal, openSqliteJournal, readJournal, type SqliteOptions } from "../index.ts";
import { type JournalEntry, withCodec } from "../journal.ts";
import { type CodecKeyOptions, cliCodec, codecErrorForCli } from "./codecKeys.ts";
import { CliError, type CliIo } from "./io.ts";
import { dbPath, type JournalSource, withPostgresJournal } from "./journalSource.ts";
import { runsFromClone } from "./packageRoot.ts";

export { entryBytes, modelCalls, type RunInfo, runInfo, stoppedText } from "../read/runInfo.ts";
export { DEFAULT_DB, dbPath, type JournalSource, journalSource } from "./journalSource.ts";

/**
 * Opens an existing journal, runs `fn`, closes it: a SQLite file (its path, or a source of kind
 * `sqlite`) or a PostgreSQL database (`journalSource`). A missing file is an error here (opening
 * would create an empty one): only `loom demo` makes a journal; so is a PostgreSQL schema without
 * Loom's tables. Commands that only read open a file read-only (nothing in the file or its folder
 * changes; a read-only file works); commands that write open only a file that already is a Loom
 * journal. Either way a file that is not one (another application's database) is refused,
 * untouched, with an error naming it.
 */
export const withJournal = <T>(source: JournalSource | string, fn: (journal: OpenJournal) => Promise<T>): Promise<T> =>
  opened(source, { readonly: true }, fn);

/**
 * The SQLite journal of a command that takes `--db` only (compact, resume, inspect), read through
 * the codec its `--codec-keys` (or `LOOM_CODEC_KEYS`) gives.
 */
export const sqliteSource = (io: CliIo, options: { db?: string } & CodecKeyOptions): JournalSource => {
  const path = dbPath(io, options.db);
  return { kind: "sqlite", path, label: path, codec: cliCodec(io, options) };
};

/** {@link withJournal} for commands that write (`compact`, `resume`, `approve`…). */
export const withWritableJournal = <T>(
  source: JournalSource | string,
  fn: (journal: OpenJournal) => Promise<T>,
): Promise<T> => opened(source, { create: false }, fn);

function opened<T>(
  source: JournalSource | string,
  options: SqliteOptions,
  fn: (journal: OpenJournal) => Promise<T>,
): Promise<T> {
  if (typeof source === "string") return openedFor(source, options, fn);
  // Read through the codec (compression told by each envelope, keys from --codec-keys); a codec
  // error names the key id and says how to pass it.
  const codec = source.codec;
  const through = (journal: OpenJournal) =>
    fn(codec === undefined ? journal : withCodec(journal, codec)).catch((e: unknown) => {
      throw codecErrorForCli(e);
    });
  return source.kind === "sqlite" ? openedFor(source.path, options, through) : withPostgresJournal(source, through);
}

async function openedFor<T>(
  path: string,
  options: SqliteOptions,
  fn: (journal: OpenJournal) => Promise<T>,
): Promise<T> {
  if (!existsSync(path)) {
    throw new CliError(
      "noJournal",
      `no journal at ${path}: run \`${runsFromClone() ? "npm run demo" : "npx loom demo"}\` to make one, or pass --db <file> (the SQLite file your program journals to)`,
    );
  }
  if (statSync(path).isDirectory()) {
    throw new CliError(
      "journalUnreadable",
      `${path} is a folder: --db takes the journal's file (for example ${join(path, "loom.db")})`,
    );
  }
  const journal = openJournalFile(path, options);
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
}

/** `openSqliteJournal`, its file errors told in the command's terms (`--db`). */
export function openJournalFile(path: string, options: SqliteOptions): OpenJournal {
  try {
    return openSqliteJournal(path, options);
  } catch (e) {
    if (!isJournalFileError(e)) throw e;
    const hint =
      e.code === "notAJournal" || e.code === "journalUnreadable"
        ? " (--db <file> names the journal; the default is ./loom.db)"
        : "";
    throw new CliError(e.code, `${e.message}${hint}`, { cause: e });
  }
}

/** A run's entries (validated); an unknown run id is an error that says how to list them. */
export async function readRun(journal: OpenJournal, runId: string, path: string): Promise<JournalEntry[]> {
  const entries = await readJournal(journal, runId);
  if (entries.length === 0) {
    throw new CliError("unknownRun", `no run "${runId}" in ${path}; \`loom runs\` lists the runs it holds`);
  }
  return entries;
}

import { resolve } from "node:path";
import { errorGuard } from "../core/errors.ts";
import type { OpenJournal } from "../index.ts";
import { cliCodec } from "./codecKeys.ts";
import { CliError, type CliIo, UsageError } from "./io.ts";
import { type JournalSource, PG_ENV } from "./journalSourceSpec.ts";

// What a source is, and the variables naming one, are read by the PostgreSQL opener too (which this file loads lazily).
export { type JournalSource, PG_ENV } from "./journalSourceSpec.ts";

/** The options of a command that opens a journal (`withJournalOptions` in options.ts adds them). */
export interface JournalOptions {
  readonly db?: string;
  readonly pg?: string;
  readonly pgSchema?: string;
  /** The key file of an encrypted journal (`--codec-keys`; else `LOOM_CODEC_KEYS`). */
  readonly codecKeys?: string;
}

/** The journal file every command reads: `--db`, relative to the working directory. */
export const DEFAULT_DB = "./loom.db";

export const dbPath = (io: CliIo, db: string | undefined): string => resolve(io.cwd, db ?? DEFAULT_DB);

/**
 * The journal a command opens. Precedence: `--pg <url>` (PostgreSQL), then `--db <file>`
 * (SQLite, whatever the environment says), then `LOOM_PG_URL` (PostgreSQL), then `./loom.db`.
 * The schema is `--pg-schema`, else `LOOM_PG_SCHEMA`, and applies to PostgreSQL only. `--pg` with
 * `--db` is refused by the option parser; `--pg-schema` without a PostgreSQL URL is a usage error.
 */
export function journalSource(io: CliIo, options: JournalOptions): JournalSource {
  const env = io.env ?? {};
  const fromEnv = options.db === undefined ? nonEmpty(env[PG_ENV.url]) : undefined;
  const url = options.pg ?? fromEnv;
  if (url === undefined) {
    if (options.pgSchema !== undefined) {
      throw new UsageError(
        `--pg-schema names a PostgreSQL schema: pass --pg <url> (or set ${PG_ENV.url}) with it, not --db`,
      );
    }
    const path = dbPath(io, options.db);
    return { kind: "sqlite", path, label: path, codec: cliCodec(io, options) };
  }
  const schema = options.pgSchema ?? nonEmpty(env[PG_ENV.schema]);
  return {
    kind: "postgres",
    url,
    ...(schema === undefined ? {} : { schema }),
    via: options.pg === undefined ? PG_ENV.url : "--pg",
    label: postgresLabel(url, schema),
    codec: cliCodec(io, options),
  };
}

/** A PostgreSQL journal named for messages: host, database and schema, never the password. */
export function postgresLabel(url: string, schema: string | undefined): string {
  let where: string;
  try {
    const u = new URL(url);
    where = `postgres ${u.host}${u.pathname}`;
  } catch {
    where = "postgres (unparsable URL)";
  }
  return `${where}${schema === undefined ? "" : ` schema ${schema}`}`;
}

const nonEmpty = (value: string | undefined): string | undefined =>
  value === undefined || value.trim() === "" ? undefined : value;

/**
 * The `pg` package is not installed: PostgreSQL journals need it (an optional peer dependency of
 * loom-agent, so a SQLite-only install does without it).
 */
export class PgNotInstalledError extends CliError {
  constructor(via: string, cause: unknown) {
    super(
      "pgNotInstalled",
      `${via} names a PostgreSQL journal, which needs the \`pg\` package (an optional peer dependency of loom-agent, not installed here): run \`npm install pg\` in your project, or pass --db <file> for a SQLite journal`,
      { cause },
    );
  }
}

/** Is `e` a `PgNotInstalledError` (a PostgreSQL journal asked for, `pg` missing)? */
export const isPgNotInstalledError = errorGuard(PgNotInstalledError, { codes: ["pgNotInstalled"] });

/** Node's error for an import of `pg` that does not resolve (and only that one: a broken `pg` is its own error). */
const isMissingPg = (e: unknown): boolean => {
  const error = e as { code?: unknown; message?: unknown } | undefined;
  return (
    (error?.code === "ERR_MODULE_NOT_FOUND" || error?.code === "MODULE_NOT_FOUND") &&
    typeof error.message === "string" &&
    /['"]pg['"]/.test(error.message)
  );
};

/**
 * Opens the PostgreSQL journal `source` names, runs `fn`, closes it (its pool ends, so the
 * command can exit). `pg` is loaded here, on first use, so a SQLite journal never needs it.
 */
export async function withPostgresJournal<T>(
  source: Extract<JournalSource, { kind: "postgres" }>,
  fn: (journal: OpenJournal) => Promise<T>,
): Promise<T> {
  let opened: typeof import("./postgresJournal.ts");
  try {
    opened = await import("./postgresJournal.ts");
  } catch (e) {
    if (isMissingPg(e)) throw new PgNotInstalledError(source.via, e);
    throw e;
  }
  const journal = await opened.openCliPostgresJournal(source);
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
}

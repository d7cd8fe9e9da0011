/**
 * The options the `loom` commands share (`--db`, `--pg`, `--codec-keys`, `--verbose`) and the
 * parsers of numeric options: what each command file adds to itself, apart from the program that
 * registers the commands.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { CODEC_KEYS_ENV } from "./codecKeys.ts";
import { DEFAULT_DB } from "./db.ts";
import { type JournalOptions, PG_ENV } from "./journalSource.ts";

/** The options every command takes. */
export interface CommonOptions {
  readonly db: string;
  /** The key file of an encrypted journal (`--codec-keys`; else `LOOM_CODEC_KEYS`). */
  readonly codecKeys?: string;
  readonly verbose?: boolean;
}

/** Adds `--db` and `--verbose` to a command that reads a journal (each command lists them in its own --help). */
export function withCommon(command: Command): Command {
  return withVerbose(command.addOption(new Option("--db <file>", "the SQLite journal file").default(DEFAULT_DB)));
}

/** Adds `--codec-keys` to a command that reads a SQLite journal with `withCommon` (compact, resume, inspect). */
export const withCodecKeys = (command: Command): Command => command.addOption(codecKeysOption());

/** `--codec-keys <file>`: the keys of an encrypted journal (codecKeys.ts). */
function codecKeysOption(): Option {
  return new Option(
    "--codec-keys <file>",
    `an encrypted journal's keys: a JSON file of key id → key (base64 of 32 bytes; default: ${CODEC_KEYS_ENV}); a compressed journal needs none`,
  );
}

/** The options of a command that reads a SQLite file or a PostgreSQL database (`journalSource`). */
export type JournalCommonOptions = Omit<CommonOptions, "db"> & JournalOptions;

/**
 * Adds `--db`, `--pg`, `--pg-schema` and `--verbose` to a command that works on a SQLite file or
 * a PostgreSQL database alike. `--db` has no default value here: whether it was given decides
 * whether `LOOM_PG_URL` applies (`journalSource`).
 */
export function withJournalOptions(command: Command): Command {
  return withVerbose(
    command
      .addOption(
        new Option("--db <file>", `the SQLite journal file (default: ${DEFAULT_DB}, unless ${PG_ENV.url} is set)`),
      )
      .addOption(
        new Option(
          "--pg <url>",
          `a PostgreSQL journal instead: its URL (default: ${PG_ENV.url}, unless --db is given)`,
        ).conflicts("db"),
      )
      .addOption(
        new Option(
          "--pg-schema <name>",
          `with a PostgreSQL journal: the schema of Loom's tables (default: ${PG_ENV.schema})`,
        ),
      )
      .addOption(codecKeysOption()),
  );
}

/** Adds `--verbose` (every command takes it). */
export const withVerbose = (command: Command): Command =>
  command.option("--verbose", "on an error, print the stack too");

/** Parses a whole number from `min` to `max` (a usage error otherwise, that says the range). */
export const integerOption =
  (min: number, max = Number.MAX_SAFE_INTEGER) =>
  (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
      throw new InvalidArgumentError(`expected a whole number ${range}, got "${value}"`);
    }
    return n;
  };

/** A TCP port: 1–65535. */
export const portOption = integerOption(1, 65_535);

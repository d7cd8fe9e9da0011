import { Command, InvalidArgumentError, Option } from "commander";
import { CODEC_KEYS_ENV } from "./codecKeys.ts";
import { registerCompact } from "./commands/compact.ts";
import { registerControl } from "./commands/control.ts";
import { registerDemo } from "./commands/demo.ts";
import { registerDiff } from "./commands/diff.ts";
import { registerInspect } from "./commands/inspect.ts";
import { registerLog } from "./commands/log.ts";
import { registerMachine } from "./commands/machine.ts";
import { registerPrune } from "./commands/prune.ts";
import { registerResume } from "./commands/resume.ts";
import { registerRuns } from "./commands/runs.ts";
import { registerSchedule } from "./commands/schedule.ts";
import { registerShow } from "./commands/show.ts";
import { registerView } from "./commands/view.ts";
import { registerWaits } from "./commands/waits.ts";
import { DEFAULT_DB } from "./db.ts";
import type { CliIo } from "./io.ts";
import { type JournalOptions, PG_ENV } from "./journalSource.ts";
import { packageVersion } from "./packageRoot.ts";

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

/** The `loom` program: every command, writing to `io`, throwing instead of exiting. */
export function buildProgram(io: CliIo): Command {
  const program = new Command("loom")
    .description(
      "Look inside Loom's journal: list runs, read their tool-call logs, resolve steps, resume, compact, inspect.",
    )
    .version(packageVersion())
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      outputError: () => {}, // main() reports errors, on one line
      getOutHelpWidth: () => io.stdout.columns ?? 100,
      getErrHelpWidth: () => io.stderr.columns ?? 100,
    })
    .showSuggestionAfterError()
    .addHelpText(
      "after",
      [
        "",
        "Commands that only read (runs, log, show, approvals, inspect) open the journal read-only and refuse a file",
        "that is not a Loom journal. Exit codes: 0 ok, 1 failure, 2 usage. With --json, errors are JSON",
        'on stdout too: { "error": { "code", "message" } }.',
        "",
        "runs, log, show, approvals, approve, deny, cancel, fork, waits, wake, deliver, prune and view read a PostgreSQL journal too:",
        `--pg <url> [--pg-schema <name>], or ${PG_ENV.url} [${PG_ENV.schema}] in the environment when no --db is given`,
        "(--db <file> always means that SQLite file). PostgreSQL needs the pg package: npm install pg.",
        "",
        "They read a journal written through the payload codec (withCodec) too: compression is told by each entry;",
        `an encrypted one needs its keys: --codec-keys <file> or ${CODEC_KEYS_ENV}, a JSON file of key id → key`,
        '(base64 of 32 bytes, e.g. { "k1": "…", "k2": "…" }; what they write is encrypted under the last key).',
        "A key the file lacks is an error naming its id (exit code 1).",
      ].join("\n"),
    );
  for (const register of [
    registerDemo,
    registerRuns,
    registerLog,
    registerDiff,
    registerShow,
    registerControl,
    registerWaits,
    registerResume,
    registerCompact,
    registerPrune,
    registerInspect,
    registerMachine,
    registerView,
    registerSchedule,
  ]) {
    register(program, io);
  }
  return program;
}

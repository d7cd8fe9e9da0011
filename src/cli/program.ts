import { Command, InvalidArgumentError, Option } from "commander";
import { registerCompact } from "./commands/compact.ts";
import { registerControl } from "./commands/control.ts";
import { registerDemo } from "./commands/demo.ts";
import { registerInspect } from "./commands/inspect.ts";
import { registerLog } from "./commands/log.ts";
import { registerMachine } from "./commands/machine.ts";
import { registerPrune } from "./commands/prune.ts";
import { registerResume } from "./commands/resume.ts";
import { registerRuns } from "./commands/runs.ts";
import { registerShow } from "./commands/show.ts";
import { registerView } from "./commands/view.ts";
import { DEFAULT_DB } from "./db.ts";
import type { CliIo } from "./io.ts";
import { packageVersion } from "./packageRoot.ts";

/** The options every command takes. */
export interface CommonOptions {
  readonly db: string;
  readonly verbose?: boolean;
}

/** Adds `--db` and `--verbose` to a command that reads a journal (each command lists them in its own --help). */
export function withCommon(command: Command): Command {
  return withVerbose(command.addOption(new Option("--db <file>", "the SQLite journal file").default(DEFAULT_DB)));
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
      ].join("\n"),
    );
  for (const register of [
    registerDemo,
    registerRuns,
    registerLog,
    registerShow,
    registerControl,
    registerResume,
    registerCompact,
    registerPrune,
    registerInspect,
    registerMachine,
    registerView,
  ]) {
    register(program, io);
  }
  return program;
}

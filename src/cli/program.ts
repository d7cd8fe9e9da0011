import { Command, InvalidArgumentError, Option } from "commander";
import { registerCompact } from "./commands/compact.ts";
import { registerDemo } from "./commands/demo.ts";
import { registerInspect } from "./commands/inspect.ts";
import { registerLog } from "./commands/log.ts";
import { registerMachine } from "./commands/machine.ts";
import { registerPrune } from "./commands/prune.ts";
import { registerResume } from "./commands/resume.ts";
import { registerRuns } from "./commands/runs.ts";
import { registerShow } from "./commands/show.ts";
import { DEFAULT_DB } from "./db.ts";
import type { CliIo } from "./io.ts";
import { packageVersion } from "./packageRoot.ts";

/** The options every command takes. */
export interface CommonOptions {
  readonly db: string;
  readonly verbose?: boolean;
}

/** Adds `--db` and `--verbose` to a command (each command lists them in its own --help). */
export function withCommon(command: Command): Command {
  return command
    .addOption(new Option("--db <file>", "the SQLite journal file").default(DEFAULT_DB))
    .option("--verbose", "on an error, print the stack too");
}

/** Parses a whole number ≥ `min` (a usage error otherwise). */
export const integerOption =
  (min: number) =>
  (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`expected a whole number ≥ ${min}, got "${value}"`);
    }
    return n;
  };

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
    .showSuggestionAfterError();
  for (const register of [
    registerDemo,
    registerRuns,
    registerLog,
    registerShow,
    registerResume,
    registerCompact,
    registerPrune,
    registerInspect,
    registerMachine,
  ]) {
    register(program, io);
  }
  return program;
}

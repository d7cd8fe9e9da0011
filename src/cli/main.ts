import { CommanderError } from "commander";
import { isLoomError } from "../index.ts";
import { type CliIo, EXIT, isUsageError, println } from "./io.ts";
import { buildProgram } from "./program.ts";

export type { CliIo, CliStream } from "./io.ts";

/**
 * Runs the `loom` command with `argv` (the arguments after `loom`) and returns its exit code:
 * 0 ok, 1 failure, 2 usage. Errors are reported on `io.stderr` as one line (the stack too with
 * `--verbose`); nothing is thrown and the process is never exited, so tests run it in-process.
 *
 * @example
 * const code = await main(["log", "demo-1", "--mode", "full", "--json"], processIo());
 */
export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const program = buildProgram(io);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return EXIT.ok;
  } catch (error) {
    return report(error, io, argv.includes("--verbose"));
  }
}

function report(error: unknown, io: CliIo, verbose: boolean): number {
  if (error instanceof CommanderError) {
    if (error.code === "commander.helpDisplayed" || error.code === "commander.version") return EXIT.ok;
    // `loom` alone: commander has printed the help on stderr.
    if (error.code === "commander.help" || error.code === "commander.executeSubCommandAsync") return EXIT.usage;
    println(io.stderr, `loom: ${error.message.replace(/^error: /, "")} (see --help)`);
    return EXIT.usage;
  }
  const usage = isUsageError(error);
  const e = error instanceof Error ? error : new Error(String(error));
  if (verbose) {
    println(io.stderr, `loom: ${e.stack ?? e.message}`);
    if (isLoomError(e)) println(io.stderr, `code: ${e.code}`);
  } else {
    const hint = usage ? " (see --help)" : isLoomError(e) ? "" : " (--verbose shows the stack)";
    println(io.stderr, `loom: ${e.message}${hint}`);
  }
  return usage ? EXIT.usage : EXIT.failure;
}

import { CommanderError } from "commander";
import { isLoomError } from "../index.ts";
import { printable } from "./format.ts";
import { type CliIo, EXIT, isUsageError, println } from "./io.ts";
import { buildProgram } from "./program.ts";

export type { CliIo, CliStream } from "./io.ts";

/**
 * Runs the `loom` command with `argv` (the arguments after `loom`) and returns its exit code:
 * 0 ok, 1 failure, 2 usage. Errors are reported on `io.stderr` as one line (the stack too with
 * `--verbose`); with `--json` they are one JSON document on `io.stdout` instead,
 * `{ "error": { "code", "message" } }`, so a program reading the output always gets JSON.
 * Nothing is thrown and the process is never exited, so tests run it in-process.
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
    const options = argv.slice(0, argv.includes("--") ? argv.indexOf("--") : undefined);
    return report(error, io, { verbose: options.includes("--verbose"), json: options.includes("--json") });
  }
}

function report(error: unknown, io: CliIo, options: { verbose: boolean; json: boolean }): number {
  if (error instanceof CommanderError) {
    if (error.code === "commander.helpDisplayed" || error.code === "commander.version") return EXIT.ok;
    // `loom` alone: commander has printed the help on stderr.
    if (error.code === "commander.help" || error.code === "commander.executeSubCommandAsync") return EXIT.usage;
    const message = `${error.message.replace(/^error: /, "")} (see --help)`;
    if (options.json) printJson(io, "usage", message);
    else println(io.stderr, `loom: ${printable(message)}`);
    return EXIT.usage;
  }
  const usage = isUsageError(error);
  const e = error instanceof Error ? error : new Error(String(error));
  const code = isLoomError(e) ? e.code : "internal";
  if (options.json) {
    printJson(io, code, e.message);
    if (options.verbose) println(io.stderr, e.stack ?? e.message);
  } else if (options.verbose) {
    // The message escaped (ids from a journal may hold control characters), then the stack's frames.
    const frames = e.stack?.startsWith(`${e.name}: ${e.message}`)
      ? e.stack.slice(`${e.name}: ${e.message}`.length)
      : "";
    println(io.stderr, `loom: ${printable(`${e.name}: ${e.message}`)}${frames}`);
    if (isLoomError(e)) println(io.stderr, `code: ${e.code}`);
  } else {
    const hint = usage ? " (see --help)" : isLoomError(e) ? "" : " (--verbose shows the stack)";
    println(io.stderr, `loom: ${printable(e.message)}${hint}`);
  }
  return usage ? EXIT.usage : EXIT.failure;
}

/** An error as `--json` prints it: `{ "error": { "code", "message" } }` on stdout. */
function printJson(io: CliIo, code: string, message: string): void {
  println(io.stdout, JSON.stringify({ error: { code, message } }, null, 2));
}

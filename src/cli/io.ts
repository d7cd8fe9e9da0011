import { errorGuard } from "../core/errors.ts";
import { LoomError } from "../index.ts";

/** Where a command writes and what it reads: the process's streams, or a test's buffers. */
export interface CliIo {
  readonly stdout: CliStream;
  readonly stderr: CliStream;
  /** Read by `loom inspect --wait` (Enter replays the run). */
  readonly stdin?: NodeJS.ReadableStream & { readonly isTTY?: boolean };
  /** Relative paths (`--db`) resolve against it. */
  readonly cwd: string;
  /** Aborted on Ctrl-C: long-running commands (`inspect`) stop cleanly. */
  readonly signal?: AbortSignal;
  /**
   * The environment the command reads (`LOOM_PG_URL`, `LOOM_PG_SCHEMA`): the process's own for
   * the `loom` binary; none unless given, so a program (or a test) running `main` in-process is
   * not steered by variables set for something else.
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export interface CliStream {
  write(text: string): unknown;
  /** A terminal: the demo draws a progress bar instead of plain lines. */
  readonly isTTY?: boolean;
  readonly columns?: number;
}

/** The exit codes: ok, failure, usage. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** A command was called wrongly (a bad option value, a missing choice): exit code 2. */
export class UsageError extends LoomError {
  constructor(message: string) {
    super("usage", message);
  }
}

/** True when `e` is a {@link UsageError}: the command line was wrong (exit code 2, usage shown). */
export const isUsageError = errorGuard(UsageError);

/** A command could not do its job for a reason the user can fix (no such run, no journal file): exit code 1. */
export class CliError extends LoomError {}

/** Writes one line. */
export const println = (stream: CliStream, line = ""): void => {
  stream.write(`${line}\n`);
};

/** The process's own streams, stdin and Ctrl-C. */
export function processIo(signal?: AbortSignal): CliIo {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    cwd: process.cwd(),
    env: process.env,
    ...(signal ? { signal } : {}),
  };
}

import { Command } from "commander";
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
import type { CliIo } from "./io.ts";
import { PG_ENV } from "./journalSource.ts";
import { packageVersion } from "./packageRoot.ts";

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

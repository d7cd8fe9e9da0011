import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Command } from "commander";
import { type AgentLoop, deliverEvent, listWaits, wakeDueRuns } from "../../index.ts";
import { journalSource, withJournal, withWritableJournal } from "../db.ts";
import { printable, table } from "../format.ts";
import { CliError, type CliIo, println } from "../io.ts";
import { type JournalCommonOptions, withJournalOptions } from "../options.ts";

const at = (iso: string | undefined) => (iso === undefined ? "-" : iso.replace("T", " ").slice(0, 19));

/** The loops a `--loops` module exports: `default` or `loops`, an array of loops or a record by loop id. */
async function loopsFrom(module: string): Promise<AgentLoop[]> {
  const imported = (await import(pathToFileURL(resolve(module)).href)) as { default?: unknown; loops?: unknown };
  const given = imported.loops ?? imported.default;
  const list = Array.isArray(given) ? given : given !== null && typeof given === "object" ? Object.values(given) : [];
  const loops = list.filter((l): l is AgentLoop => typeof (l as AgentLoop | null)?.run === "function");
  if (loops.length === 0) {
    throw new CliError(
      "noLoops",
      `${module} exports no loops: export \`loops\` (or a default export), an array of agentLoop$(…) or a record of them`,
    );
  }
  return loops;
}

/** A time option: ISO 8601 or ms since the epoch. */
function timeOf(text: string | undefined): (() => number) | undefined {
  if (text === undefined) return undefined;
  const ms = /^\d+$/.test(text) ? Number(text) : Date.parse(text);
  if (Number.isNaN(ms))
    throw new CliError("usage", `--now: expected an ISO 8601 time or ms since the epoch, got "${text}"`);
  return () => ms;
}

/** `loom waits`, `loom wake`, `loom deliver`: durable waits from a shell (docs/waits.md). */
export function registerWaits(program: Command, io: CliIo): void {
  withJournalOptions(program.command("waits"))
    .description(
      "list everything the runs wait for: sleeps (until when), events (how to deliver) and approvals (one kind of wait)",
    )
    .option("--run <runId>", "only this run's")
    .option("--json", "print an array of waits as JSON")
    .action(async (options: JournalCommonOptions & { run?: string; json?: boolean }) => {
      const source = journalSource(io, options);
      const waits = await withJournal(source, (journal) =>
        listWaits(journal, options.run === undefined ? {} : { runId: options.run }),
      );
      if (options.json) return println(io.stdout, JSON.stringify(waits, null, 2));
      if (waits.length === 0) return println(io.stdout, `nothing waits in ${source.label}`);
      const rows = waits.map((w) => [
        printable(w.runId),
        printable(w.stepId),
        w.kind,
        printable(w.what ?? w.toolName),
        at(w.until),
        at(w.expiresAt),
      ]);
      println(io.stdout, table(["run", "step", "kind", "what", "until", "expires"], rows));
      for (const w of waits) println(io.stdout, `${printable(w.stepId)}: ${printable(w.deliver)}`);
    });

  withJournalOptions(program.command("wake"))
    .description(
      "resume the runs whose waits are due (a sleep's time came, an event was delivered, a wait timed out): run it from cron or a timer on SQLite; on PostgreSQL workers do it by themselves. Without --loops it only lists what is due",
    )
    .option(
      "--loops <module>",
      "a module exporting the loops to resume (`export const loops = [agentLoop$(…)]`); a .ts module needs node --import tsx",
    )
    .option("--run <runId>", "only this run")
    .option("--now <time>", "the clock, ISO 8601 or ms (default: now): what a wait is due by")
    .option("--json", "print what was done as JSON")
    .action(async (options: JournalCommonOptions & { loops?: string; run?: string; now?: string; json?: boolean }) => {
      const loops = options.loops === undefined ? [] : await loopsFrom(options.loops);
      const now = timeOf(options.now);
      const woken = await withWritableJournal(journalSource(io, options), (journal) =>
        wakeDueRuns(journal, {
          loops,
          dryRun: options.loops === undefined,
          ...(now === undefined ? {} : { now }),
          ...(options.run === undefined ? {} : { runId: options.run }),
        }),
      );
      if (options.json) return println(io.stdout, JSON.stringify(woken, null, 2));
      if (woken.length === 0) return println(io.stdout, "no run waits");
      const rows = woken.map((w) => [
        printable(w.runId),
        printable(w.loopId ?? "-"),
        w.ended === "event-delivered"
          ? "event delivered"
          : w.ended === "wait-ended"
            ? "wait ended"
            : w.dueAt === undefined
              ? "on delivery"
              : at(w.dueAt),
        w.outcome + (w.reason ? ` (${w.reason})` : w.error ? `: ${printable(w.error)}` : ""),
      ]);
      println(io.stdout, table(["run", "loop", "due", "outcome"], rows));
      if (options.loops === undefined && woken.some((w) => w.outcome === "no-loop"))
        println(io.stdout, "to resume the due runs: loom wake --loops <module exporting their loops>");
    });

  withJournalOptions(program.command("deliver"))
    .description(
      "deliver the event a tool call waits for: journals the payload as the call's outcome (once: a second delivery, a forged or an expired token is refused and nothing is journaled)",
    )
    .argument("<token>", "the token the waiting tool handed out (lw1.…)")
    .option("--payload <json|@file>", "the event's payload: JSON, or @ and a file holding JSON", "null")
    .option("--json", "print what was journaled as JSON")
    .action(async (token: string, options: JournalCommonOptions & { payload: string; json?: boolean }) => {
      const text = options.payload.startsWith("@") ? readFileSync(options.payload.slice(1), "utf8") : options.payload;
      let payload: unknown;
      try {
        payload = JSON.parse(text);
      } catch {
        throw new CliError("usage", `--payload: not JSON: ${text.slice(0, 80)}`);
      }
      const delivered = await withWritableJournal(journalSource(io, options), (journal) =>
        deliverEvent(journal, token, payload, { by: "loom deliver" }),
      );
      if (options.json) return println(io.stdout, JSON.stringify(delivered, null, 2));
      println(
        io.stdout,
        `run ${printable(delivered.runId)}: delivered to ${printable(delivered.toolName)} (${printable(delivered.stepId)}); it goes on when the run resumes (loom wake --loops …, loop.run, or a PostgreSQL worker by itself)`,
      );
    });
}

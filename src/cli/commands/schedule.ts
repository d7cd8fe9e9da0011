import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Command } from "commander";
import { type OpenJournal, runSchedules, type Schedule } from "../../index.ts";
import { fireDueTicks, scheduleTickOf, type TickReport } from "../../journal.ts";
import { type JournalSource, journalSource, openJournalFile } from "../db.ts";
import { table } from "../format.ts";
import { CliError, type CliIo, println, UsageError } from "../io.ts";
import { withPostgresJournal } from "../journalSource.ts";
import { type JournalCommonOptions, withJournalOptions } from "../options.ts";

/** The schedules a module exports: `export const schedules = [schedule(...), …]`, or its default export. */
async function loadSchedules(io: CliIo, module: string): Promise<readonly Schedule[]> {
  const path = resolve(io.cwd, module);
  let exported: Record<string, unknown>;
  try {
    exported = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (e) {
    throw new CliError(
      "scheduleModule",
      `cannot load ${path}: ${(e as Error).message}; pass a module that exports \`schedules\` (a .js/.mjs file, or .ts when loom runs under tsx: node --import tsx node_modules/.bin/loom …)`,
      { cause: e },
    );
  }
  const found = exported.schedules ?? exported.default;
  const isSchedule = (s: unknown) =>
    typeof (s as Partial<Schedule>)?.runIdOf === "function" && typeof (s as Partial<Schedule>).nextTick === "function";
  if (!Array.isArray(found) || found.length === 0 || !found.every(isSchedule)) {
    throw new CliError(
      "noSchedules",
      `${path} exports no schedules: export const schedules = [schedule({ id, cron, loop, input })] (or a default export of that array)`,
    );
  }
  return found as Schedule[];
}

/** The time `--now` names, or the clock. */
function clockOf(now: string | undefined): () => Date {
  if (now === undefined) return () => new Date();
  const at = new Date(now);
  if (Number.isNaN(at.getTime()))
    throw new UsageError(`--now takes an ISO 8601 time (2026-03-01T09:00:00Z), got "${now}"`);
  return () => at;
}

/** A journal to write to: a SQLite file is created if absent (the scheduler may come first). */
async function withScheduleJournal<T>(source: JournalSource, fn: (journal: OpenJournal) => Promise<T>): Promise<T> {
  if (source.kind === "postgres") return withPostgresJournal(source, fn);
  const journal = openJournalFile(source.path, {});
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
}

/** The newest tick of `s` the journal has a run of. */
async function lastTick(journal: OpenJournal, s: Schedule): Promise<Date | undefined> {
  let last: Date | undefined;
  for (const { runId } of await journal.store.listRuns({ prefix: `${s.id}@` })) {
    const tick = scheduleTickOf(runId, s.id);
    if (tick !== undefined && (last === undefined || tick > last)) last = tick;
  }
  return last;
}

const when = (d: Date | undefined) => (d === undefined ? "-" : d.toISOString().replace("T", " ").slice(0, 19));

function printReport(io: CliIo, report: TickReport, json: boolean | undefined, handedOver: boolean): void {
  if (json) {
    println(io.stdout, JSON.stringify(report));
    return;
  }
  for (const r of report.resumed ?? []) println(io.stdout, `resumed ${r.runId} (left part-way by a process that died)`);
  for (const f of report.fired) println(io.stdout, `${handedOver ? "submitted" : "ran"} ${f.runId}`);
  for (const s of report.skipped) {
    println(
      io.stdout,
      `skipped ticks of ${s.scheduleId} from ${s.first.toISOString()} to ${s.last.toISOString()} (missed)`,
    );
  }
}

const MODULE_HELP =
  "a module exporting `schedules` (an array of schedule(...)): .js/.mjs, or .ts when loom runs under tsx";

/** `loom schedule list|run <module>`: the schedules a program defines, and firing their due ticks. */
export function registerSchedule(program: Command, io: CliIo): void {
  const command = program
    .command("schedule")
    .description("list a program's schedules, or fire their due ticks (a loop started on a cron pattern)")
    .addHelpText(
      "after",
      [
        "",
        "A tick's run is named <scheduleId>@<tick>, so a tick fired twice is one run. A schedule resumes from its",
        "newest run (SQLite) or from loom_schedules (PostgreSQL); ticks missed while nothing looked follow its",
        "`missed` policy (skip, latest, all). See docs/schedules.md.",
      ].join("\n"),
    );

  withJournalOptions(command.command("list"))
    .description("each schedule: cron, time zone, missed-tick policy, last fired tick (its newest run), next tick")
    .argument("<module>", MODULE_HELP)
    .option("--now <time>", "read the next tick from this time (ISO 8601) instead of the clock")
    .option("--json", "print an array of schedules as JSON")
    .action(async (module: string, options: JournalCommonOptions & { now?: string; json?: boolean }) => {
      const now = clockOf(options.now)();
      const schedules = await loadSchedules(io, module);
      const source = journalSource(io, options);
      // A SQLite file not there yet has no runs: listing does not create it.
      const lastTicks =
        source.kind === "sqlite" && !existsSync(source.path)
          ? schedules.map(() => undefined)
          : await withScheduleJournal(source, (journal) => Promise.all(schedules.map((s) => lastTick(journal, s))));
      const rows = schedules.map((s, i) => ({
        id: s.id,
        cron: s.cron,
        timezone: s.timezone,
        missed: s.missed,
        loop: s.loop.config.id,
        lastTick: lastTicks[i]?.toISOString() ?? null,
        nextTick: s.nextTick(now)?.toISOString() ?? null,
      }));
      if (options.json) return println(io.stdout, JSON.stringify(rows, null, 2));
      println(
        io.stdout,
        table(
          ["schedule", "cron", "time zone", "missed", "loop", "last fired", "next tick"],
          rows.map((r) => [
            r.id,
            r.cron,
            r.timezone,
            r.missed,
            r.loop,
            when(r.lastTick === null ? undefined : new Date(r.lastTick)),
            when(r.nextTick === null ? undefined : new Date(r.nextTick)),
          ]),
        ),
      );
    });

  withJournalOptions(command.command("run"))
    .description(
      "fire the due ticks once: on SQLite each tick's run runs here (the command ends when they have); on PostgreSQL they are submitted to the workers (startWorker). Call it from the system's cron, or pass --watch",
    )
    .argument("<module>", MODULE_HELP)
    .option("--watch", "keep firing at each tick until Ctrl-C")
    .option("--now <time>", "look as if it were this time (ISO 8601), to try a schedule; not with --watch")
    .option("--json", "print what each look fired and skipped as one JSON line")
    .action(
      async (module: string, options: JournalCommonOptions & { now?: string; json?: boolean; watch?: boolean }) => {
        if (options.watch && options.now !== undefined) throw new UsageError("--now and --watch do not go together");
        const now = clockOf(options.now);
        const schedules = await loadSchedules(io, module);
        const source = journalSource(io, options);
        const onError = (e: unknown, runId?: string) =>
          println(
            io.stderr,
            `loom: ${runId === undefined ? "" : `run ${runId}: `}${(e as Error).message ?? String(e)}`,
          );
        await withScheduleJournal(source, async (journal) => {
          if (source.kind === "postgres") {
            const pg = await import("../../postgres.ts");
            if (!options.watch) {
              printReport(io, await pg.fireDueOnPostgres(journal, schedules, { now }), options.json, true);
              return;
            }
            const scheduler = pg.startScheduler({
              journal,
              schedules,
              onTicks: (r) => printReport(io, r, options.json, true),
              onError,
            });
            await untilAborted(io.signal);
            await scheduler.stop();
            return;
          }
          if (!options.watch) {
            printReport(io, await fireDueTicks(journal, schedules, { now, onError }), options.json, false);
            return;
          }
          await runSchedules(journal, schedules, {
            ...(io.signal ? { signal: io.signal } : {}),
            onTicks: (r) => printReport(io, r, options.json, false),
            onError,
          });
        });
      },
    );
}

const untilAborted = (signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => {
    if (signal === undefined) return; // the process ends it
    if (signal.aborted) return resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });

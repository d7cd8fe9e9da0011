import type { Journal } from "../events/spi.ts";
import { dueTicks, initialCursor } from "../policies/schedule.ts";
import type { FiredTick, SkippedTicks, TickReport } from "../runtime/run/runSchedules.ts";
import { type Schedule, tickInput } from "../runtime/run/schedule.ts";
import type { PgDatabase } from "./database.ts";
import { databaseOf, submitRun } from "./submit.ts";

/** What `startScheduler` fires: schedules, on a PostgreSQL journal whose workers run the ticks. */
export interface SchedulerOptions {
  /** A journal on PostgreSQL (`openPostgresJournal`): its workers (`startWorker`) run the ticks' runs. */
  readonly journal: Journal;
  /** The schedules to fire (`schedule(...)`); their loops must be among the workers' loops. */
  readonly schedules: readonly Schedule[];
  /** The wall clock the ticks are read against (default `() => new Date()`); tests pass a fake one. */
  readonly now?: () => Date;
  /** The longest wait between two looks (default 1 s); a look also comes at each schedule's next tick. */
  readonly pollMs?: number;
  /**
   * Told of each look that failed (the database is down…; the scheduler keeps looking), and of each
   * tick not fired because its `input(tick)` threw (`ScheduleError`, code `inputFailed`).
   */
  readonly onError?: (error: unknown) => void;
  /** Told of each look that fired or skipped ticks, in the process that did it. */
  readonly onTicks?: (report: TickReport) => void;
}

/** A running scheduler (`startScheduler`). */
export interface Scheduler {
  /** One look now, besides the timed ones: what this process fired and skipped. */
  fireDue(): Promise<TickReport>;
  /** Stops looking; resolves once a look in progress has ended. Runs already handed over stay queued. */
  stop(): Promise<void>;
}

/**
 * One look at one schedule, under its row's lock: the cursor row is created once (first look
 * wins), locked with SKIP LOCKED (another process holding it is firing this schedule now, so this
 * one moves on), the due ticks are submitted to the workers, and the cursor moves to the newest due
 * tick, only if it is still the one read. A process that dies mid-look rolls the cursor back: the
 * next look submits the same ticks again, which names the same runs, so no tick runs twice.
 */
async function lookAt(
  db: PgDatabase,
  journal: Journal,
  s: Schedule,
  now: Date,
  report: Looked,
  onError: (error: unknown) => void,
): Promise<void> {
  const t = db.tables;
  const client = await db.pool.connect();
  try {
    await client.query("BEGIN");
    await client.query(
      `INSERT INTO ${t.schedules} (schedule_id, cursor_ms) VALUES ($1, $2) ON CONFLICT (schedule_id) DO NOTHING`,
      [s.id, initialCursor(s, now).getTime()],
    );
    const row = await client.query<{ cursor_ms: string }>(
      `SELECT cursor_ms FROM ${t.schedules} WHERE schedule_id = $1 FOR UPDATE SKIP LOCKED`,
      [s.id],
    );
    const read = row.rows[0]?.cursor_ms;
    if (read === undefined) {
      await client.query("COMMIT"); // another scheduler is looking at this schedule
      return;
    }
    const due = dueTicks(s, new Date(Number(read)), now);
    const fired: FiredTick[] = [];
    for (const tick of due.fire) {
      const runId = s.runIdOf(tick);
      let input: ReturnType<Schedule["input"]>;
      try {
        input = tickInput(s, tick);
      } catch (e) {
        onError(e); // not fired; the schedule goes on
        continue;
      }
      // Its own transaction: a tick submitted before a crash here is only queued again next time.
      await submitRun(journal, { runId, loop: s.loop, input }).catch((e: unknown) => {
        // The run is in the journal with another input (input(tick) changed since): queue that run.
        if ((e as { code?: unknown }).code !== "inputMismatch") throw e;
        return submitRun(journal, { runId, loop: s.loop });
      });
      fired.push({ scheduleId: s.id, tick, runId });
    }
    if (due.cursor.getTime() !== Number(read)) {
      await client.query(
        `UPDATE ${t.schedules} SET cursor_ms = $2, updated_at = now() WHERE schedule_id = $1 AND cursor_ms = $3`,
        [s.id, due.cursor.getTime(), read],
      );
    }
    await client.query("COMMIT");
    report.fired.push(...fired);
    if (due.skipped !== undefined) report.skipped.push({ scheduleId: s.id, ...due.skipped });
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

interface Looked {
  fired: FiredTick[];
  skipped: SkippedTicks[];
}

/**
 * One look at every schedule on a PostgreSQL journal: due ticks are handed to the workers with
 * `submitRun` (run id `<scheduleId>@<tick>`), and each schedule's place (its last handled tick) is
 * kept in `loom_schedules`. Any number of processes may look at once: each tick is submitted by one
 * of them, and were it submitted twice (a process that died mid-look) its run id names one run.
 * Ticks missed while no process looked follow the schedule's `missed` policy. What
 * {@link startScheduler} does at each tick; call it yourself from a job runner instead if you like.
 *
 * @example
 * ```ts
 * import { fireDueOnPostgres, openPostgresJournal } from "loom-agent/postgres";
 * const journal = openPostgresJournal(process.env.DATABASE_URL!);
 * const { fired } = await fireDueOnPostgres(journal, [digest]);
 * ```
 */
export async function fireDueOnPostgres(
  journal: Journal,
  schedules: readonly Schedule[],
  options: {
    readonly now?: () => Date;
    /** Told of a tick not fired because its `input(tick)` threw (`ScheduleError`, `inputFailed`). */
    readonly onError?: (error: unknown) => void;
  } = {},
): Promise<TickReport> {
  const db = databaseOf(journal, "fireDueOnPostgres");
  await db.ready;
  const now = (options.now ?? (() => new Date()))();
  const report: Looked = { fired: [], skipped: [] };
  const onError = options.onError ?? (() => {});
  for (const s of schedules) await lookAt(db, journal, s, now, report, onError);
  return report;
}

/**
 * Fires `schedules` on a PostgreSQL journal from this process, at each next tick and at least every
 * `pollMs` (see {@link fireDueOnPostgres}): run it beside `startWorker` in every worker process; the
 * workers run the ticks' runs, each exactly once however many processes fire the schedule.
 *
 * @example
 * ```ts
 * import { openPostgresJournal, startScheduler, startWorker } from "loom-agent/postgres";
 * const journal = openPostgresJournal(process.env.DATABASE_URL!);
 * const worker = startWorker({ journal, loops: { digest: digestLoop } });
 * const scheduler = startScheduler({ journal, schedules: [digest] });
 * process.on("SIGTERM", async () => {
 *   await scheduler.stop();
 *   await worker.stop();
 *   await journal.close();
 * });
 * ```
 */
export function startScheduler(options: SchedulerOptions): Scheduler {
  const { journal, schedules, onError, onTicks } = options;
  databaseOf(journal, "startScheduler");
  const now = options.now ?? (() => new Date());
  const pollMs = options.pollMs ?? 1000;
  let stopping = false;
  let wake = () => {};
  const tell = (e: unknown) => {
    try {
      onError?.(e);
    } catch {
      // a throwing reporter must not stop the scheduler
    }
  };
  const look = async () => {
    const report = await fireDueOnPostgres(journal, schedules, { now, onError: tell });
    if (report.fired.length > 0 || report.skipped.length > 0) onTicks?.(report);
    return report;
  };
  const looping = (async () => {
    while (!stopping) {
      const at = now();
      try {
        await look();
      } catch (e) {
        tell(e);
      }
      const next = Math.min(...schedules.map((s) => s.nextTick(at)?.getTime() ?? Number.POSITIVE_INFINITY));
      const ms = Math.max(1, Math.min(pollMs, next - at.getTime()));
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
        if (stopping) wake();
      });
    }
  })();
  return {
    fireDue: look,
    async stop() {
      stopping = true;
      wake();
      await looping;
    },
  };
}

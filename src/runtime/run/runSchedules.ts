import { scheduleTickOf } from "../../events/ids.ts";
import type { Journal } from "../../events/spi.ts";
import { dueTicks, initialCursor } from "../../policies/schedule.ts";
import { runActivity } from "../control/activity.ts";
import { RunStops } from "./runStops.ts";
import { type Schedule, tickInput } from "./schedule.ts";

/** A tick a scheduler fired: which schedule, when, and the run it names. */
export interface FiredTick {
  readonly scheduleId: string;
  readonly tick: Date;
  /** `<scheduleId>@<tick>`. */
  readonly runId: string;
}

/** Due ticks a scheduler did not fire, by the schedule's `missed` policy. */
export interface SkippedTicks {
  readonly scheduleId: string;
  /** The oldest and newest of them (ticks between may be skipped too). */
  readonly first: Date;
  readonly last: Date;
}

/** What one look at the schedules did. */
export interface TickReport {
  readonly fired: readonly FiredTick[];
  readonly skipped: readonly SkippedTicks[];
  /**
   * Runs of earlier ticks that a process which died (killed, crashed) left part-way, and that this
   * look resumed: the embedded scheduler finishes them. Present only when there are some; on
   * PostgreSQL the workers resume such runs instead.
   */
  readonly resumed?: readonly FiredTick[];
}

/** The clock and stop signal of the embedded scheduler. */
export interface RunSchedulesOptions {
  /** The wall clock the ticks are read against (default `() => new Date()`); tests pass a fake one. */
  readonly now?: () => Date;
  /** Passed to each run; aborting it also ends `runSchedules`. */
  readonly signal?: AbortSignal;
  /** Told of each fired run that failed or stopped before its answer (default: ignored). */
  readonly onError?: (error: unknown, runId: string) => void;
  /** Told of each look that fired or skipped ticks. */
  readonly onTicks?: (report: TickReport) => void;
  /** The longest wait between two looks (default 1 s); a look also comes at each schedule's next tick. */
  readonly pollMs?: number;
}

/** A schedule's runs in the journal: the newest tick run, and the runs not ended yet (by their last entry). */
interface RecordedTicks {
  readonly last: Date | undefined;
  readonly open: readonly FiredTick[];
}

/**
 * The runs of `s` in the journal (their ids sort by tick). On a store without a run id index,
 * `listRuns` may return other runs too: they are filtered.
 */
async function recordedTicks(journal: Journal, s: Schedule): Promise<RecordedTicks> {
  let last: Date | undefined;
  const open: FiredTick[] = [];
  for (const run of await journal.store.listRuns({ prefix: `${s.id}@` })) {
    const tick = scheduleTickOf(run.runId, s.id);
    if (tick === undefined) continue;
    if (last === undefined || tick > last) last = tick;
    // Ended (completed, failed, cancelled) or interrupted (a wait, an abort): only a part-way run is open.
    if (run.lastType === "run.started" || !run.lastType.startsWith("run.")) {
      open.push({ scheduleId: s.id, tick, runId: run.runId });
    }
  }
  return { last, open };
}

/**
 * Whether a part-way run was left by a process that is gone: nobody holds it (`stalled`, or
 * `not-started` when only its `run.started` was written). A store that cannot say who holds a run
 * reports it running, and it is left alone.
 */
async function leftByTheDead(journal: Journal, runId: string): Promise<boolean> {
  const { activity } = await runActivity(journal, runId);
  return activity === "stalled" || activity === "not-started";
}

/**
 * What to fire now on a journal without a schedules table: the cursor is the newest run's tick.
 * Runs of the schedules left part-way by a process that died are resumed too (`resumed`).
 */
export async function planTicks(
  journal: Journal,
  schedules: readonly Schedule[],
  now: Date,
  busy: ReadonlySet<string> = new Set(),
): Promise<TickReport> {
  const fired: FiredTick[] = [];
  const skipped: SkippedTicks[] = [];
  const resumed: FiredTick[] = [];
  for (const s of schedules) {
    const recorded = await recordedTicks(journal, s);
    for (const run of recorded.open) {
      if (!busy.has(run.runId) && (await leftByTheDead(journal, run.runId))) resumed.push(run);
    }
    const due = dueTicks(s, recorded.last ?? initialCursor(s, now), now);
    for (const tick of due.fire) {
      const runId = s.runIdOf(tick);
      if (!busy.has(runId)) fired.push({ scheduleId: s.id, tick, runId });
    }
    if (due.skipped !== undefined) skipped.push({ scheduleId: s.id, ...due.skipped });
  }
  return resumed.length > 0 ? { fired, skipped, resumed } : { fired, skipped };
}

/** The runs a look starts: the ticks it fired, and the runs it resumes. */
const runsOf = (report: TickReport): readonly FiredTick[] => [...(report.resumed ?? []), ...report.fired];

/** Starts (or resumes) a tick's run; a run already in the journal keeps its recorded input. */
async function runTick(journal: Journal, s: Schedule, fired: FiredTick, stops: RunStops) {
  const stop = stops.open();
  try {
    const existing = await journal.store.read(fired.runId);
    await s.loop.run({
      runId: fired.runId,
      journal,
      ...(existing.length === 0 ? { input: tickInput(s, fired.tick) } : {}),
      ...(stop ? { signal: stop.signal } : {}),
    });
  } finally {
    if (stop) stops.close(stop);
  }
}

const byId = (schedules: readonly Schedule[]) => new Map(schedules.map((s) => [s.id, s]));

/**
 * One look, in this process: fires every due tick of `schedules` by running its loop on `journal`
 * (run id `<scheduleId>@<tick>`), and resolves once those runs have ended. The schedule's place is
 * its newest run in the journal, so a look after a restart or in another process (`loom schedule
 * run`, started by the system's cron) picks up where the last left off, and ticks missed meanwhile
 * follow the schedule's `missed` policy. A run that fails is reported to `onError`; it is not fired
 * again (resume it with `loop.run({ runId, journal })`). A run of an earlier tick that a process
 * left part-way (killed, crashed: nobody holds it and its journal does not end) is resumed, and
 * reported in `resumed`. Runs on any journal; on PostgreSQL with
 * many processes use `startScheduler` from `loom-agent/postgres`, which hands ticks to workers.
 *
 * @example
 * ```ts
 * const report = await fireDueTicks(journal, [digest]);
 * for (const f of report.fired) console.log(`ran ${f.runId}`);
 * ```
 */
export async function fireDueTicks(
  journal: Journal,
  schedules: readonly Schedule[],
  options: Omit<RunSchedulesOptions, "pollMs" | "onTicks"> = {},
): Promise<TickReport> {
  const now = options.now ?? (() => new Date());
  const report = await planTicks(journal, schedules, now());
  const found = byId(schedules);
  const stops = new RunStops(options.signal);
  try {
    await Promise.all(
      runsOf(report).map((f) =>
        runTick(journal, found.get(f.scheduleId) as Schedule, f, stops).catch((e) => options.onError?.(e, f.runId)),
      ),
    );
  } finally {
    stops.dispose();
  }
  return report;
}

/**
 * The embedded scheduler, for one process (SQLite, memory, or PostgreSQL with a single scheduler):
 * looks at `schedules` at each next tick (and at least every `pollMs`), starts each due tick's run
 * without waiting for it, and resolves once `signal` aborts and the runs in hand have ended. A tick
 * is fired once: its run id names it, and a run in hand is not started again. See
 * {@link fireDueTicks} for the place a schedule resumes from and the missed-tick policy.
 *
 * @example
 * ```ts
 * const stop = new AbortController();
 * const scheduler = runSchedules(openJournal("loom.db"), [digest], { signal: stop.signal });
 * process.on("SIGTERM", () => stop.abort());
 * await scheduler;
 * ```
 */
export async function runSchedules(
  journal: Journal,
  schedules: readonly Schedule[],
  options: RunSchedulesOptions = {},
): Promise<void> {
  await lookUntil(journal, schedules, options, options.signal, options.signal);
}

/** The looks of the embedded scheduler until `looking` aborts, then the runs in hand; `runs` is passed to each run. */
async function lookUntil(
  journal: Journal,
  schedules: readonly Schedule[],
  options: Omit<RunSchedulesOptions, "signal">,
  looking: AbortSignal | undefined,
  runs: AbortSignal | undefined,
): Promise<void> {
  const now = options.now ?? (() => new Date());
  const pollMs = options.pollMs ?? 1000;
  const found = byId(schedules);
  const inHand = new Map<string, Promise<void>>();
  const stops = new RunStops(runs);
  // Ticks this process fired: one whose run failed before its journal began is not fired again.
  const firedHere = new Set<string>();
  try {
    while (!looking?.aborted) {
      const at = now();
      const report = await planTicks(journal, schedules, at, firedHere);
      if (report.fired.length > 0 || report.skipped.length > 0 || report.resumed) options.onTicks?.(report);
      for (const f of runsOf(report)) {
        firedHere.add(f.runId);
        const done = runTick(journal, found.get(f.scheduleId) as Schedule, f, stops)
          .catch((e) => options.onError?.(e, f.runId))
          .finally(() => inHand.delete(f.runId));
        inHand.set(f.runId, done);
      }
      const next = Math.min(...schedules.map((s) => s.nextTick(at)?.getTime() ?? Number.POSITIVE_INFINITY));
      await pause(Math.max(1, Math.min(pollMs, next - at.getTime())), looking);
    }
  } finally {
    while (inHand.size > 0) await Promise.all(inHand.values());
    stops.dispose();
  }
}

/** The embedded scheduler started by {@link startSchedules}. */
export interface RunningSchedules {
  /**
   * Stops looking and resolves once the runs in hand have ended (drained): no tick is fired after
   * it is called. With `abort: true` those runs are aborted instead (each journals
   * `run.interrupted`, reason `aborted`; resume it with `loop.run({ runId, journal })`). Rejects
   * with the error of a look that failed (the journal could not be read), which ended the looks.
   */
  stop(options?: { readonly abort?: boolean }): Promise<void>;
}

/**
 * The embedded scheduler as a handle, for a program on SQLite (or memory) that fires its schedules
 * in-process: what {@link runSchedules} does, with a `stop()` that lets the runs in hand finish
 * (the ticks they were fired for are done, not cut off). Use one per SQLite file; on PostgreSQL,
 * `startWorker({ schedules })` from `loom-agent/postgres` fires them from any number of workers.
 *
 * @example
 * ```ts
 * const scheduler = startSchedules(openJournal("loom.db"), [digest]);
 * process.on("SIGTERM", async () => {
 *   await scheduler.stop(); // no new tick; the digest being written is finished
 * });
 * ```
 */
export function startSchedules(
  journal: Journal,
  schedules: readonly Schedule[],
  options: Omit<RunSchedulesOptions, "signal"> = {},
): RunningSchedules {
  const looking = new AbortController();
  const runs = new AbortController();
  const done = lookUntil(journal, schedules, options, looking.signal, runs.signal);
  done.catch(() => {}); // a look that failed (the journal's file…) ends the looks: stop() rejects with it
  return {
    async stop(stopOptions) {
      if (stopOptions?.abort) runs.abort(new Error("the scheduler is stopping"));
      looking.abort();
      await done;
    },
  };
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

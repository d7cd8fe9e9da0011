import { Cron } from "croner";

/**
 * What happens to ticks that passed while no scheduler was running (an outage, a deploy), that is,
 * ticks older than `lateAfterMs` when a scheduler first sees them:
 * - `"skip"`: none of them runs; the schedule goes on from the next tick.
 * - `"latest"`: the newest of them runs (once), unless a tick on time runs anyway; the rest are skipped.
 * - `"all"`: each of them runs, the newest `maxMissed` at most; older ones are skipped.
 *
 * Ticks on time (due less than `lateAfterMs` ago) always run, whatever the policy.
 */
export type MissedTicks = "skip" | "latest" | "all";

/** Every {@link MissedTicks} policy. */
export const MISSED_TICKS: readonly MissedTicks[] = ["skip", "latest", "all"];

/** The ticks of a cron pattern in a time zone, read without a clock: every time is given. */
export interface CronTicks {
  /** The first tick after `after` (exclusive), or undefined if the pattern has no more. */
  nextTick(after: Date): Date | undefined;
  /** The newest ticks at or before `at`, newest first, at most `count`. */
  ticksBefore(at: Date, count: number): Date[];
}

/**
 * The ticks of `pattern` (5 fields, or 6 with seconds first, as croner reads it) in the IANA time
 * zone `timezone`. Throws croner's error for a pattern it cannot read.
 *
 * @example
 * cronTicks("0 9 * * 1-5", "Europe/Paris").nextTick(new Date("2026-03-02T00:00:00Z")); // 2026-03-02T08:00:00.000Z
 */
export function cronTicks(pattern: string, timezone: string): CronTicks {
  const cron = new Cron(pattern, { timezone, paused: true });
  return {
    nextTick: (after: Date) => cron.nextRun(after) ?? undefined,
    // croner's reference is exclusive: one ms later includes a tick at `at`.
    ticksBefore: (at: Date, count: number) => cron.previousRuns(count, new Date(at.getTime() + 1)),
  };
}

/** What the missed-ticks policy reads of a schedule: its ticks and its settings. */
export interface TickPolicy extends CronTicks {
  /** The policy for missed ticks. */
  readonly missed: MissedTicks;
  /** The most ticks one look fires. */
  readonly maxMissed: number;
  /** How old a due tick may be and still count as on time. */
  readonly lateAfterMs: number;
  /** No tick before it, if given. */
  readonly startAt: Date | undefined;
}

/** What one look at a schedule decides ({@link dueTicks}). */
export interface DueTicks {
  /** The ticks to fire now, oldest first. */
  readonly fire: readonly Date[];
  /** The oldest and newest due ticks the policy did not fire (there may be others between), if any. */
  readonly skipped: { readonly first: Date; readonly last: Date } | undefined;
  /** Where the schedule stands after this look: its newest due tick (or `cursor` when none was due). */
  readonly cursor: Date;
}

/**
 * Where a schedule stands when no tick of it was recorded yet: just before `startAt`, else at the
 * tick before its newest one, and no earlier than `lateAfterMs` before now. So a tick due a moment
 * before the first look still runs, and only that one: the ticks before it came before the
 * schedule did, and are neither run nor reported as missed.
 *
 * @example
 * const cursor = initialCursor(digest, new Date()); // the look fires at most the tick due a moment ago
 */
export function initialCursor(s: TickPolicy, now: Date): Date {
  if (s.startAt !== undefined) return new Date(s.startAt.getTime() - 1);
  const window = now.getTime() - s.lateAfterMs;
  const before = s.ticksBefore(now, 2)[1]?.getTime() ?? window;
  return new Date(Math.max(window, before));
}

/**
 * The policy, as a pure decision: given the last tick the schedule handled (`cursor`) and the time,
 * which ticks fire now. The due ticks are those after `cursor` and at or before `now`; those due
 * less than `lateAfterMs` ago are on time and always fire; the late ones follow `missed`.
 *
 * @example
 * const s = schedule({ id: "hourly", cron: "0 * * * *", loop, input: () => "go", missed: "latest" });
 * dueTicks(s, new Date("2026-01-01T00:00:00Z"), new Date("2026-01-01T05:30:00Z"));
 * // { fire: [05:00], skipped: { first: 01:00, last: 04:00 }, cursor: 05:00 }
 */
export function dueTicks(s: TickPolicy, cursor: Date, now: Date): DueTicks {
  const fetched = s.ticksBefore(now, s.maxMissed + 1).filter((t) => t.getTime() > cursor.getTime());
  const due = fetched.reverse(); // oldest first
  const newest = due[due.length - 1];
  if (newest === undefined) return { fire: [], skipped: undefined, cursor };
  const lateBefore = now.getTime() - s.lateAfterMs;
  const onTime = due.filter((t) => t.getTime() >= lateBefore);
  const late = due.filter((t) => t.getTime() < lateBefore);
  let fire: Date[];
  if (s.missed === "all") fire = due.slice(-s.maxMissed);
  else if (s.missed === "latest") fire = onTime.length > 0 ? onTime : late.slice(-1);
  else fire = onTime;
  fire = fire.slice(-s.maxMissed);
  const fired = new Set(fire.map((t) => t.getTime()));
  const notFired = due.filter((t) => !fired.has(t.getTime()));
  // The look fetched maxMissed + 1 ticks: when all were due, older due ticks may lie before them.
  const oldestDue = due.length > s.maxMissed ? s.nextTick(cursor) : due[0];
  const first = notFired.length > 0 ? (due.length > s.maxMissed ? oldestDue : notFired[0]) : undefined;
  const last = notFired[notFired.length - 1];
  return {
    fire,
    skipped: first !== undefined && last !== undefined ? { first, last } : undefined,
    cursor: newest,
  };
}

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { AgentLoopConfigError, isOwnershipLostError, isRunBusyError, isRunCancelledError } from "../core/errors.ts";
import type { Journal } from "../events/spi.ts";
import type { RunLease } from "../events/store.ts";
import { isAgentInterruptedError } from "../runtime/base/errors.ts";
import type { AgentLoop } from "../runtime/run/agentLoop.ts";
import type { TickReport } from "../runtime/run/runSchedules.ts";
import type { Schedule } from "../runtime/run/schedule.ts";
import { type Claimed, leases } from "./leases.ts";
import { listenForDue } from "./notify.ts";
import { databaseHealth } from "./outage.ts";
import { parkedFor, waitingDueOf } from "./parkedWaits.ts";
import { claimOwnRead, type Pickup, pickedUpJournal } from "./pickup.ts";
import { batchedRenewals } from "./renewals.ts";
import { type InHandContext, RunInHand } from "./runInHand.ts";
import { startScheduler } from "./scheduler.ts";
import { ownStore } from "./store.ts";
import { databaseOf } from "./submit.ts";

/** What `startWorker` runs: a journal on PostgreSQL and the loops it may resume. */
export interface WorkerOptions {
  /** A journal on PostgreSQL (`openPostgresJournal`): its database holds the runs and their leases. */
  readonly journal: Journal;
  /** The loops this worker can run, by loop id; it claims only runs of these loops. */
  readonly loops: Readonly<Record<string, AgentLoop>>;
  /** Names this worker in the lease rows (default: host, pid and a random suffix). */
  readonly owner?: string;
  /** How long a claim lasts without renewal (default 30 s); renewed every third of it while working. */
  readonly leaseMs?: number;
  /**
   * The monotonic clock, in ms, that a run's lease is timed by before each model or tool call
   * (default `performance.now`; see `HeldLease`): never the wall clock, which can jump. For tests
   * that watch or fake when the lease was last checked.
   */
  readonly now?: () => number;
  /**
   * The clock durable waits are judged by in the runs this worker resumes (their `RunOptions.now`;
   * default `Date.now`). A parked run is claimed when PostgreSQL's clock (`now()`) reaches its
   * wake time (or an approval's expiry), and resumed only once this clock has too: until then it stays parked (nothing
   * journaled) and is looked at again when due by this clock, at most `pollMs` later. Tests pass a
   * fake one; one ahead of the database's clock wakes no parked run sooner (the database's claims it).
   */
  readonly clock?: () => number;
  /**
   * How long to wait before looking again when no run is due (default 1 s). Runs submitted or
   * handed back are announced with NOTIFY and claimed at once; the poll finds the rest (a lease
   * that ran out, a retry whose backoff ended, an announcement missed during an outage).
   */
  readonly pollMs?: number;
  /** Runs worked on at once by this worker (default 1). */
  readonly concurrency?: number;
  /**
   * Told of each run that failed an attempt (it is retried later) and of database errors, these
   * as `WorkerDatabaseError`: the first at once, then at most one per `errorIntervalMs` counting
   * the ones left out, so an outage does not flood the log.
   */
  readonly onError?: (error: unknown, runId: string | undefined) => void;
  /** The least time between two reports of database errors (default 10 s). */
  readonly errorIntervalMs?: number;
  /**
   * Schedules this worker also fires (`schedule(...)`), as `startScheduler` beside it would: each
   * due tick is handed to the workers once, however many workers fire the same schedules (a row
   * lock in `loom_schedules`). Each schedule's loop must be one of `loops`. A look failing, or a
   * tick whose `input` throws, is told to `onError` (without a run id).
   */
  readonly schedules?: readonly Schedule[];
  /** The wall clock the schedules' ticks are read against (default `() => new Date()`); tests pass a fake one. */
  readonly scheduleNow?: () => Date;
  /** Told of each look at `schedules` that fired or skipped ticks, in the worker that did it. */
  readonly onTicks?: (report: TickReport) => void;
}

/** A running worker (`startWorker`): who it is, what it works on, and how to stop it. */
export interface Worker {
  /** Its name in the lease rows. */
  readonly owner: string;
  /** The runs being worked on now. */
  readonly active: readonly string[];
  /**
   * Stops claiming and resolves once the runs in hand are done (drained). With `abort: true`
   * they are aborted instead (each journals `run.interrupted` and is handed back, due at once).
   */
  stop(options?: { readonly abort?: boolean }): Promise<void>;
}

/**
 * Runs claimed per statement at most: a worker with thousands of free slots fills them a few
 * hundred at a time, so no claim holds thousands of row locks or reads thousands of journals at once.
 */
const CLAIM_BATCH = 250;

/** A failed attempt waits 1 s, doubling with each failure, at most 5 minutes. */
const backoffMs = (failures: number) => Math.min(1000 * 2 ** failures, 300_000);

/**
 * Starts a worker: it claims runs submitted with `submitRun` (or handed back by another worker)
 * through a lease row in the database, resumes each with `loops[loopId].run({ runId, journal })`,
 * renews the lease while it works and takes the run off the queue when it completes or waits for
 * its caller (an approval, the iteration limit). A lease that runs out (its worker was killed or
 * stalled) lets another worker take the run over: the journal makes the resume exact, and a tool
 * cut off mid-call runs again with the same `stepId`. A run that fails an attempt (a model error,
 * an exception) is handed back with a growing delay. Any number of workers, in any number of
 * processes on any number of machines, can share one database. With `schedules`, it also fires
 * their due ticks (exactly once per tick across all the workers), so a program starts one thing.
 *
 * @example
 * import { openPostgresJournal, startWorker } from "loom-agent/postgres";
 * const journal = openPostgresJournal(process.env.DATABASE_URL!);
 * const worker = startWorker({ journal, loops: { support: supportLoop } });
 * process.on("SIGTERM", () => worker.stop().then(() => journal.close()));
 *
 * @example
 * // A worker that also fires the digest schedule's ticks (any number of them may run it).
 * const worker = startWorker({ journal, loops: { digest: digestLoop }, schedules: [digest] });
 */
export function startWorker(options: WorkerOptions): Worker {
  const { journal, loops, onError } = options;
  const db = databaseOf(journal, "startWorker");
  const lease = leases(db);
  const fast = ownStore(journal.store);
  const owner = options.owner ?? `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  const leaseMs = options.leaseMs ?? 30_000;
  const now = options.now ?? (() => performance.now());
  const pollMs = options.pollMs ?? 1000;
  const clock = options.clock ?? Date.now;
  const concurrency = options.concurrency ?? 1;
  const poolSize = (db.pool as { options?: { max?: number } }).options?.max ?? 10;
  for (const [id, loop] of Object.entries(loops)) {
    if (loop.config.id !== id) {
      throw new AgentLoopConfigError(
        `startWorker: loops["${id}"] is the loop "${loop.config.id}"; key each loop by its id`,
        "workerLoops",
      );
    }
  }
  for (const s of options.schedules ?? []) {
    if (loops[s.loop.config.id] === undefined) {
      throw new AgentLoopConfigError(
        `startWorker: schedule "${s.id}" starts the loop "${s.loop.config.id}", which is not among its loops; add loops["${s.loop.config.id}"] (the loop the schedule names) so the worker can run its ticks`,
        "workerLoops",
      );
    }
  }
  const loopIds = Object.keys(loops);
  const active = new Map<string, { controller: AbortController; done: Promise<void> }>();
  // The runs in hand, each renewed by the worker's one renewal tick.
  const renewing = new Map<string, RunInHand>();
  const renewals = batchedRenewals(db, owner, leaseMs);
  let stopping = false;
  let wake: () => void = () => {};
  // Set by a wake-up that came while no nap was pending (mid-claim): the next nap returns at once.
  let kicked = false;
  const nap = (ms: number) =>
    new Promise<void>((resolve) => {
      if (kicked || stopping) return resolve();
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const kick = () => {
    kicked = true;
    wake();
  };
  const report = (e: unknown, runId: string | undefined) => {
    try {
      onError?.(e, runId);
    } catch {
      // a throwing reporter must not stop the worker
    }
  };
  const health = databaseHealth(owner, db.label, (e) => report(e, undefined), options.errorIntervalMs ?? 10_000);
  const inHandContext: InHandContext = {
    owner,
    leaseMs,
    now,
    renewals,
    store: fast !== undefined ? undefined : journal.store,
    failed: (what, e) => health.failed(what, e),
  };

  /** `claimedAt`: when the claim was sent (performance.now), which took the run's ownership on a fast path. */
  async function work(claim: Pickup, controller: AbortController, claimedAt: number): Promise<void> {
    const { runId } = claim;
    // The run's ownership (the store's lease): its token fences every append the run makes, so
    // a worker that stalled past its lease cannot start a model or tool call once another has
    // the run, and the run checks it by this process's clock before each effect (HeldLease).
    // The queue row above only says who should be working on it.
    let owned: RunLease;
    let sentAt = claimedAt;
    if (claim.owned !== undefined) owned = claim.owned.lease;
    else {
      try {
        sentAt = now();
        owned = await journal.store.acquire(runId, { owner, leaseMs });
      } catch (e) {
        if (!isRunBusyError(e)) throw e;
        await lease.postpone(runId, owner, Math.max(pollMs, e.retryAfterMs));
        return;
      }
    }
    // A parked durable wait (or expiring approval) that PostgreSQL's clock finds due and this worker's clock does not
    // (parkedWaits.ts): left parked, nothing journaled, looked at again when due by this clock.
    const due = claim.woken
      ? undefined // something woke it (a sub-agent's approval): resume it now
      : claim.owned !== undefined
        ? waitingDueOf(claim.owned.entries.at(-1))
        : await lease.waitingDue(runId);
    const parked = parkedFor(due, clock(), pollMs);
    if (parked !== undefined) {
      await journal.store.release(owned);
      await lease.postpone(runId, owner, parked);
      return;
    }
    // On a store Loom made, the run's journal was read by the claim and its last append finishes it.
    const picked =
      fast !== undefined && claim.owned !== undefined
        ? pickedUpJournal(journal, fast, runId, claim.owned.entries, owner)
        : undefined;
    const inHand = new RunInHand(runId, controller, inHandContext, owned, sentAt);
    const held = inHand.held;
    renewing.set(runId, inHand);
    let released = false;
    try {
      await loops[claim.loopId]!.run({
        runId,
        journal: picked?.journal ?? journal,
        signal: controller.signal,
        ownership: { lease: held },
        ...(options.clock === undefined ? {} : { now: options.clock }),
      });
      renewing.delete(runId); // the run is done: no renewal after its release
      if (!picked?.finished()) await lease.finishAndRelease(runId, owner, held.token);
      released = true;
    } catch (e) {
      if (inHand.lost || isOwnershipLostError(e)) return; // another worker holds the run now
      const reason = isAgentInterruptedError(e) ? e.run.reason : undefined;
      // A budget stop is finished for now too: running it again would stop at the same call until the budget is raised.
      const waits =
        reason === "approval-pending" ||
        reason === "waiting" ||
        reason === "max-iterations" ||
        reason === "deadline" ||
        reason === "budget";
      if (waits || isRunCancelledError(e)) {
        renewing.delete(runId);
        // A run whose approvals expire stays queued, due when the first one does (the run declines it).
        if (picked?.finished()) {
          // its last append took it off the queue and released it
        } else if (reason === "approval-pending" || reason === "waiting") {
          // A durable wait parks the run as an approval does: due at its first wake or timeout (docs/waits.md).
          await lease.waitForApproval(runId, owner, held.token);
        } else await lease.finishAndRelease(runId, owner, held.token);
        released = true;
      } else if (reason === "aborted" && controller.signal.aborted) await lease.releaseNow(runId, owner);
      else {
        report(e, runId);
        await lease.retryLater(runId, owner, backoffMs(claim.failures), String(e));
      }
    } finally {
      renewing.delete(runId);
      // A no-op when another worker holds the run now (the token moved on).
      if (!released) await journal.store.release(held.lease).catch((e) => report(e, runId));
    }
  }

  const served = new Set(loopIds);
  const listener = listenForDue(db, {
    due: (loopId) => {
      if (served.has(loopId)) kick();
    },
    connected: kick,
    failed: (e) => health.failed("listening for due runs", e),
  });

  // After the listener, so a tick handed over is announced to a worker already listening.
  const scheduler =
    options.schedules !== undefined && options.schedules.length > 0
      ? startScheduler({
          journal,
          schedules: options.schedules,
          pollMs,
          onError: (e) => report(e, undefined),
          ...(options.scheduleNow ? { now: options.scheduleNow } : {}),
          ...(options.onTicks ? { onTicks: options.onTicks } : {}),
        })
      : undefined;

  // One renewal tick for every run in hand, a third of the lease apart: one batched statement.
  const renewalTick = setInterval(() => {
    for (const run of renewing.values()) run.tick();
  }, leaseMs / 3);

  let swept = 0; // when the queue was last swept of runs that need no worker (at most once a lease)
  const polling = (async () => {
    while (!stopping) {
      kicked = false; // a wake-up from here on comes after this look, so it counts
      if (active.size >= concurrency) {
        await nap(pollMs); // a run that ends wakes it
        continue;
      }
      // Back-pressure: more statements wait for a connection than the pool has (the database is
      // slow, or the pool too small for the runs in hand), so taking on more runs would only add
      // to the queue. A few waiting is the normal state of thousands of runs in hand: holding
      // every claim until none waits left most slots empty (bench/inflight.ts).
      if (db.pool.waitingCount > poolSize) {
        await nap(Math.min(pollMs, 50));
        continue;
      }
      let claimed: Claimed<Pickup>;
      const claimedAt = now(); // a run's lease taken by the claim is proved from here
      try {
        const free = Math.min(concurrency - active.size, CLAIM_BATCH);
        claimed =
          fast !== undefined
            ? await claimOwnRead(db, owner, loopIds, leaseMs, free)
            : await lease.claim(owner, loopIds, leaseMs, free);
        health.ok();
      } catch (e) {
        await nap(health.failed("claiming a run", e)); // growing waits while the database is down
        continue;
      }
      const { claims } = claimed;
      if (claims.length === 0) {
        if (claimed.dropped > 0) continue; // the head of the queue needed no worker: more may be due behind it
        if (Date.now() - swept >= leaseMs) {
          swept = Date.now();
          await lease.sweep().catch((e) => health.failed("sweeping the queue", e));
        }
        await nap(pollMs);
        continue;
      }
      for (const claim of claims) {
        const { runId } = claim;
        const controller = new AbortController();
        const done = work(claim, controller, claimedAt)
          .catch((e) => {
            health.failed(`releasing run ${runId}`, e); // the lease runs out instead
          })
          .finally(() => {
            active.delete(runId);
            kick();
          });
        active.set(runId, { controller, done });
      }
    }
  })();

  let stopped: Promise<void> | undefined;
  return {
    owner,
    get active() {
      return [...active.keys()];
    },
    stop(stopOptions) {
      if (stopOptions?.abort)
        for (const { controller } of active.values()) controller.abort(new Error("worker stopping"));
      stopping = true;
      wake();
      stopped ??= (async () => {
        await scheduler?.stop(); // no tick handed over after the stop
        await polling;
        await listener.stop();
        while (active.size > 0) await Promise.all([...active.values()].map((a) => a.done));
        clearInterval(renewalTick);
      })();
      return stopped;
    },
  };
}

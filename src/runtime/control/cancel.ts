import type { RunHolderInfo } from "../../core/errors.ts";
import { isRunBusyError } from "../../core/errors.ts";
import { checkRunId } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import { foldEntries, type RunState } from "../../projections/runState.ts";
import { openSubRunsOf } from "../subruns/subRuns.ts";
import { isRunControlError, RunControlError } from "./errors.ts";

/** What `cancelRun` asks for. */
export interface CancelOptions {
  /** Why: journaled in `run.cancelled`, and in the `RunCancelledError` the run's caller gets. */
  readonly reason: string;
  /**
   * When a live process runs the run: how long to wait for it to stop and journal
   * `run.cancelled`, in ms (default 0: return once the request is recorded).
   */
  readonly waitMs?: number;
}

/** What `cancelRun` did. */
export interface CancelResult {
  /**
   * `cancelled`: `run.cancelled` is journaled (by this call, by the run's owner, or earlier).
   * `requested`: a live process runs it; it stops at its next step and journals `run.cancelled`.
   */
  readonly status: "cancelled" | "requested";
  /** Who runs it, while `requested`. */
  readonly holder?: RunHolderInfo;
  /**
   * The sub-agent runs (`agentTool`) below it that had not ended, cancelled with it (children
   * before theirs), each with its own status. Absent when it has none.
   */
  readonly subRuns?: readonly SubRunCancel[];
}

/** What `cancelRun` did to one sub-agent run below the run it cancelled. */
export interface SubRunCancel {
  readonly runId: string;
  /** As `CancelResult.status`, or `ended`: the sub-agent completed or failed on its own meanwhile. */
  readonly status: CancelResult["status"] | "ended";
  /** Who runs it, while `requested`. */
  readonly holder?: RunHolderInfo;
}

/** How long `cancelRun` holds a run it ends itself. */
const CANCEL_LEASE_MS = 10_000;

/**
 * Cancels a run, from any process. The request is recorded beside the run's ownership, where
 * the owner's fenced appends and lease renewals look: a loop running the run (in this process or
 * another, a PostgreSQL worker too) stops at its next step, its tool in flight aborted through
 * its signal (the reason is a `RunCancelledError`), and journals `run.cancelled`. When no one
 * runs it, this call takes the run's ownership and journals `run.cancelled` itself. A request
 * left while its owner crashed is honoured by the next `loop.run`. A cancelled run is never
 * resumed: `loop.run` on it rejects with `RunCancelledError`. Cancelling a cancelled run
 * again is harmless; a completed or failed run is refused (`RunControlError`, `runFinished`),
 * and so is an unknown one (`runNotFound`). The run's sub-agents (`agentTool`'s child runs
 * `<runId>/<stepId>`, and theirs) that have not ended are cancelled with it, each the same way
 * (requested while the parent's process runs them, else journaled here): `subRuns` says how.
 *
 * @example
 * const { status } = await cancelRun(journal, "order-42", { reason: "customer hung up", waitMs: 5_000 });
 * // "cancelled"; loop.run({ runId: "order-42", journal }) now rejects with RunCancelledError
 */
export async function cancelRun(journal: Journal, runId: string, options: CancelOptions): Promise<CancelResult> {
  checkRunId(runId, "cancelRun");
  const { store } = journal;
  const state = foldEntries(await readJournal(journal, runId));
  const done = ended(runId, state);
  const below = await openSubRunsOf(journal, runId);
  if (done && below.length === 0) return done;
  // Every request first: a live child stops at its next step without waiting for its parent to notice.
  const deadline = Date.now() + (options.waitMs ?? 0);
  if (!done) await store.requestCancel(runId, options.reason);
  for (const child of below) await store.requestCancel(child, options.reason);
  const result = done ?? (await endOrWait(journal, runId, options.reason, deadline));
  if (below.length === 0) return result;
  const subRuns: SubRunCancel[] = [];
  for (const child of below) {
    const one = await endOrWait(journal, child, options.reason, deadline).catch((e: unknown) => {
      if (isRunControlError(e) && e.code === "runFinished") return { status: "ended" as const };
      throw e;
    });
    subRuns.push({ runId: child, ...one });
  }
  return { ...result, subRuns };
}

/** Ends run `runId` (its cancel requested) once no one holds it, or says it is requested when `deadline` passes first. */
async function endOrWait(journal: Journal, runId: string, reason: string, deadline: number): Promise<CancelResult> {
  const { store } = journal;
  for (;;) {
    let lease: Awaited<ReturnType<typeof store.acquire>>;
    try {
      lease = await store.acquire(runId, { owner: "cancelRun", leaseMs: CANCEL_LEASE_MS });
    } catch (e) {
      // A live owner has the request (its next append or renewal sees it) and ends the run; or
      // it lets go without ending it (a crash): then this loop, or the next loop.run, ends it.
      if (!isRunBusyError(e)) throw e;
      if (Date.now() >= deadline) return { status: "requested", holder: e.holder };
      await new Promise((resolve) => setTimeout(resolve, Math.min(100, Math.max(1, deadline - Date.now()))));
      continue;
    }
    try {
      const now = foldEntries(await readJournal(journal, runId));
      const over = ended(runId, now);
      if (over) return over;
      const first = lease.cancelRequested ?? reason; // the first request's reason
      await store.append(runId, [{ type: "run.cancelled", data: { reason: first } }], {
        expectedVersion: now.version,
        fence: lease.token,
      });
      return { status: "cancelled" };
    } finally {
      await store.release(lease);
    }
  }
}

/** The answer for a run that ended already, or undefined while it can still be cancelled. */
function ended(runId: string, state: RunState): CancelResult | undefined {
  if (state.status === "cancelled") return { status: "cancelled" };
  if (state.status === "new") {
    throw new RunControlError(
      "runNotFound",
      runId,
      `run ${runId} is not in this journal; check the run id (loom runs)`,
    );
  }
  if (state.status === "completed" || state.status === "failed") {
    throw new RunControlError(
      "runFinished",
      runId,
      `run ${runId} has ${state.status}: there is nothing to cancel (a cancelled run is one that had not ended)`,
    );
  }
  return undefined;
}

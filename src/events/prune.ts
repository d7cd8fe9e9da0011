import { errorGuard, LoomError } from "../core/errors.ts";
import type { Journal } from "./spi.ts";
import type { EventStore, PruneResult } from "./store.ts";

export type { PruneResult } from "./store.ts";

/** What `pruneRuns` removes: finished runs older than `completedBefore`, in batches, or only counts them. */
export interface PruneOptions {
  /** Finished runs whose last entry is older than this go: a Date, or ms since the epoch. */
  readonly completedBefore: Date | number;
  /** Runs removed per transaction (default 100): each batch is short, so live runs never wait long. */
  readonly batchSize?: number;
  /** Count what would go and remove nothing. */
  readonly dryRun?: boolean;
}

/** The store keeps no way to prune (only the PostgreSQL store has one so far). */
export class PruneNotSupportedError extends LoomError {
  constructor(what: string) {
    super(
      "pruneNotSupported",
      `pruneRuns: ${what} cannot prune runs; only the PostgreSQL store (loom/postgres) can so far: remove old runs with your database's tools, or move the journal to PostgreSQL`,
    );
  }
}

/** Is `e` a `PruneNotSupportedError` (a store that cannot prune)? */
export const isPruneNotSupportedError = errorGuard(PruneNotSupportedError, { codes: ["pruneNotSupported"] });

/**
 * Retention: removes the runs that finished (completed, failed or cancelled) before
 * `completedBefore`, with their entries, their archived frames and the blobs that no remaining
 * run names (blobs are content-addressed, so two runs can share one). A cancelled run has ended
 * for good (`loop.run` on it rejects with `RunCancelledError`), so it goes as a failed one does.
 * Interrupted runs are kept whatever their age: they can be resumed (an approval, a higher
 * iteration limit, a retry after a model error). A session's message (`<sessionId>/<n>`) is kept
 * while a later message of its session is: that one names its history rather than copying it.
 * Runs go in batches, one transaction each, skipping any run a writer holds, so live runs go on
 * while it works. Throws `PruneNotSupportedError` for a store that cannot prune.
 *
 * @example
 * import { pruneRuns } from "loom";
 * const week = 7 * 24 * 3600 * 1000;
 * const { runs, blobs } = await pruneRuns(journal, { completedBefore: Date.now() - week });
 */
export async function pruneRuns(target: Journal | EventStore, options: PruneOptions): Promise<PruneResult> {
  const store = "store" in target ? target.store : target;
  const completedBefore =
    typeof options.completedBefore === "number" ? options.completedBefore : options.completedBefore.getTime();
  const batchSize = options.batchSize ?? 100;
  if (!Number.isFinite(completedBefore) || !Number.isInteger(batchSize) || batchSize < 1) {
    throw new LoomError(
      "pruneOptions",
      `pruneRuns: completedBefore must be a valid time and batchSize a whole number ≥ 1, got ${String(options.completedBefore)} and ${String(options.batchSize)}`,
    );
  }
  if (store.prune === undefined) throw new PruneNotSupportedError("this store");
  return store.prune({ completedBefore, batchSize, dryRun: options.dryRun ?? false });
}

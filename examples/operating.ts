import { cancelRun, forkRun, type Journal, listPendingApprovals, recordApproval } from "loom-agent";
import { supportLoop } from "./approvals.ts";

/** An operator's console, from any process that opens the journal: what waits, and the answers. */
export async function approveAll(journal: Journal, by: string) {
  for (const pending of await listPendingApprovals(journal)) {
    // { runId, stepId, toolName, input, inputDigest, requestedAt, expiresAt? }
    await recordApproval(journal, pending.runId, pending.stepId, {
      approved: true,
      by,
      inputDigest: pending.inputDigest ?? undefined, // refused if the call would now run with another input
    });
  }
}

/** The process that owns the loop's code resumes the run (a PostgreSQL worker does it by itself). */
export const resume = (journal: Journal, runId: string, refunded?: string[]) =>
  supportLoop(refunded).run({ runId, journal });

/** Stop a run for good: a loop running it, in any process, stops at its next step. */
export const stop = (journal: Journal, runId: string) =>
  cancelRun(journal, runId, { reason: "duplicate", waitMs: 5_000 });

/** Try again from the model's second call, in a new run: the source is not touched. */
export const retryFrom = (journal: Journal, runId: string) =>
  forkRun(journal, runId, { at: "support#turn:1:model", newRunId: `${runId}-retry` });

/**
 * The lines `loom approvals` and `loom cancel` print about sub-agent runs (`agentTool`) in text
 * mode: what their `--json` already says (`PendingApproval.parent`, `CancelResult.subRuns`).
 */
import type { CancelResult, PendingApproval } from "../../index.ts";
import { printable } from "../format.ts";

/**
 * For each listed approval that waits in a sub-agent's run: the parent run and the call it waits
 * under, and the root run to resume once it is answered. None for top-level runs' own calls.
 */
export function subRunApprovalLines(pending: readonly PendingApproval[]): string[] {
  return pending.flatMap((p) =>
    p.parent === undefined
      ? []
      : [
          `${printable(p.stepId)} waits in the sub-agent run ${printable(p.runId)}, under run ${printable(p.parent.runId)}'s call ${printable(p.parent.stepId)}: answer it with --run '${printable(p.runId)}', then resume run ${printable(p.rootRunId ?? p.parent.runId)}`,
        ],
  );
}

/** One line per sub-agent run a cancel reached, children before theirs. */
export function subRunCancelLines(result: CancelResult): string[] {
  return (result.subRuns ?? []).map((s) => {
    const h = s.holder;
    const what =
      s.status === "cancelled"
        ? "cancelled"
        : s.status === "ended"
          ? "had ended on its own, left as it is"
          : `cancel requested; ${h ? `${printable(h.owner)} (pid ${h.pid} on ${printable(h.host)})` : "its owner"} stops it at its next step`;
    return `  └ sub-agent run ${printable(s.runId)}: ${what}`;
  });
}

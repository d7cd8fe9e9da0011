import { isRunCancelledError, RunCancelledError } from "../../core/errors.ts";
import { parseFrameId } from "../../events/ids.ts";
import type { NewEntry } from "../../events/types.ts";
import type { Interruption } from "../../machines/agentLoop.machine.ts";
import { approvalExpiry } from "../../policies/approval.ts";
import { responseAt } from "../../projections/runState.ts";
import type { RunSession } from "../session.ts";
import { waitingDetail } from "../waits.ts";

/**
 * The few places the loop's runtime consults run control (cancel, approval expiry): small
 * functions the runtime calls, so the loop's own files stay about the loop.
 */

/** The cancellation a stop carries: a `RunCancelledError` as the abort's reason (the interruption's detail). */
function cancellationOf(session: RunSession, detail: unknown): RunCancelledError | undefined {
  if (isRunCancelledError(detail)) return detail;
  const reason = session.options.signal?.reason;
  return isRunCancelledError(reason) ? reason : undefined;
}

/**
 * The entry that ends a stopping run (the `interrupt` actor appends it): `run.cancelled` when the
 * stop is a cancellation (`cancelRun`), else `run.interrupted`, which for `approval-pending` also
 * journals when each waiting call's approval expires (its tool's `approvalTimeoutMs`), and for
 * `waiting` when each wait is next due (`waitingDetail`).
 */
export function interruptionEntry(session: RunSession, input: Interruption & { readonly turn: number }): NewEntry {
  const cancelled = cancellationOf(session, input.detail);
  if (cancelled) return { type: "run.cancelled", data: { reason: cancelled.reason } };
  const { reason, cause } = input;
  const detail =
    reason === "approval-pending"
      ? withExpiries(session, input.detail, Date.now())
      : reason === "waiting"
        ? waitingDetail(session.state, (input.detail as { stepIds: string[] }).stepIds)
        : input.detail;
  return { type: "run.interrupted", data: cause === undefined ? { reason, detail } : { reason, detail, cause } };
}

/** `{ stepIds }` plus `expiresAt` (step id → ISO time) for the calls whose tool has `approvalTimeoutMs`. */
function withExpiries(session: RunSession, detail: unknown, now: number): unknown {
  const stepIds = (detail as { stepIds?: unknown } | null)?.stepIds;
  if (!Array.isArray(stepIds)) return detail;
  const tools = session.config.tools ?? {};
  const expiresAt: Record<string, string> = {};
  for (const stepId of stepIds as string[]) {
    const parsed = parseFrameId(stepId);
    if (parsed?.kind !== "tool") continue;
    const name = responseAt(session.state, parsed.turn)?.toolCalls[parsed.index]?.name;
    const tool = name !== undefined && Object.hasOwn(tools, name) ? tools[name] : undefined;
    const wait = session.state.approvalRequests[stepId] ?? { requestedAt: now };
    const at = approvalExpiry(wait, tool?.approvalTimeoutMs);
    if (at !== undefined) expiresAt[stepId] = new Date(at).toISOString();
  }
  return Object.keys(expiresAt).length === 0 ? detail : { ...(detail as object), expiresAt };
}

/**
 * After the loop's chart stopped: the `RunCancelledError` the run ends with, if it was cancelled.
 * A cancellation that reached the run where its chart could not journal it (starting, finishing)
 * is journaled here, with whatever results were still to be written.
 */
export async function cancelledOutcome(session: RunSession): Promise<RunCancelledError | undefined> {
  const runId = session.options.runId;
  const state = session.appender?.state;
  if (state?.status === "cancelled") return new RunCancelledError(runId, state.cancelled?.reason ?? "");
  const cancelled = cancellationOf(session, undefined);
  if (cancelled === undefined) return undefined;
  if (state === undefined || state.status === "new") return cancelled;
  if (state.status === "completed" || state.status === "failed") return undefined;
  await session.appender.appendFinal({ type: "run.cancelled", data: { reason: cancelled.reason } });
  return cancelled;
}

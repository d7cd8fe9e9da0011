import { isLoomError } from "../../core/errors.ts";
import { parseFrameId } from "../../events/ids.ts";
import type { NewEntry } from "../../events/types.ts";
import type { Interruption } from "../../machines/agentLoop.protocol.ts";
import { approvalExpiry } from "../../policies/approval.ts";
import { responseAt } from "../../projections/runState.ts";
import { waitingDetail } from "../../projections/waits.ts";
import { AppendAfterCloseError } from "../base/appender.ts";
import type { RunSession } from "./session.ts";

/**
 * The few places the loop's runtime consults run control (cancel, approval expiry): small
 * functions the runtime calls, so the loop's own files stay about the loop.
 */

/**
 * The `run.interrupted` entry of a run that stops, for any reason (the chart decides which); for
 * `approval-pending` it also journals when each waiting call's approval expires (its tool's
 * `approvalTimeoutMs`, counted on the run's clock: `RunOptions.now`, as waits are), and for `waiting` when each wait is next due (`waitingDetail`).
 */
export function interruptionEntry(session: RunSession, input: Interruption & { readonly turn: number }): NewEntry {
  const { reason, cause } = input;
  const detail =
    reason === "approval-pending"
      ? withExpiries(session, input.detail, session.now())
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
 * Whether a run that cancels has a journal to end: not when it never started (nothing of it was
 * journaled, nor is waiting to be) or has ended already.
 */
export function cancelEnds(session: RunSession): boolean {
  const status = session.openedAppender?.state.status;
  return status === "running" || status === "interrupted";
}

/**
 * The `run.failed` entry of a run that failed for good, or undefined when the failure is not the
 * run's to journal: the run had not got past `prepare` (nothing of this call is journaled), the
 * error is one of Loom's own refusals (a `LoomError`: its message says what to fix, and the run
 * stays resumable, as each one documents), the store failed an append (the journal is what
 * failed), the run ended already, or this is a replay of a recording. What is left is an error
 * nothing in Loom expected (a bug in a hook, the runtime's own): resuming would meet it again.
 */
export function failedEntry(session: RunSession, error: unknown): NewEntry | undefined {
  const appender = session.openedAppender;
  if (!session.walks || !session.mode.keepsRecords || appender === undefined) return undefined;
  if (isLoomError(error) || error instanceof AppendAfterCloseError || appender.storeFailure !== undefined)
    return undefined;
  const status = appender.state.status;
  if (status !== "running" && status !== "interrupted") return undefined;
  const e = error instanceof Error ? error : undefined;
  const code = (error as { code?: unknown } | null)?.code;
  return {
    type: "run.failed",
    data: {
      error: {
        name: e?.name ?? "Error",
        ...(typeof code === "string" ? { code } : {}),
        message: e?.message ?? String(error),
      },
    },
  };
}

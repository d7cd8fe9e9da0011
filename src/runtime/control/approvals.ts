import { digestOfRecorded } from "../../core/digest.ts";
import { RunCancelledError } from "../../core/errors.ts";
import { readJournal } from "../../events/journal.ts";
import { checkRunId, runIdProblem } from "../../events/runId.ts";
import type { Journal } from "../../events/spi.ts";
import type { NewEntry, ToolCall } from "../../events/types.ts";
import { declinedResult } from "../../policies/approval.ts";
import { approvalId, DECISION_SOURCES, parseFrameId } from "../../projections/ids.ts";
import { foldEntries, type RunState, responseAt } from "../../projections/runState.ts";
import { hydrateArchived } from "../readers.ts";
import { ApprovalRefusedError, RunControlError } from "./errors.ts";

/** A tool call waiting for a person's approval (`listPendingApprovals`). */
export interface PendingApproval {
  readonly runId: string;
  /** The call's step id: what `recordApproval`, `run({ approvals })` and `loom approve` take. */
  readonly stepId: string;
  readonly toolName: string;
  /** The input the call will run with once approved. */
  readonly input: unknown;
  /** sha256 hex of the input's canonical JSON: an approval is bound to it. */
  readonly inputDigest: string | null;
  /** When the run first stopped for it (ISO 8601). */
  readonly requestedAt: string;
  /** When it will be declined if no one answers (ISO 8601): its tool's `approvalTimeoutMs`. */
  readonly expiresAt?: string;
}

/**
 * Every tool call waiting for approval: of the runs whose last entry is an `approval-pending`
 * interruption (or of `runId` alone), the calls it lists that no one decided yet, with their
 * input, its digest, and when the approval was asked for and expires. Reads only.
 *
 * @example
 * for (const p of await listPendingApprovals(journal)) {
 *   console.log(`${p.runId} ${p.stepId}: ${p.toolName}(${JSON.stringify(p.input)}) since ${p.requestedAt}`);
 * }
 */
export async function listPendingApprovals(
  journal: Journal,
  options: { readonly runId?: string } = {},
): Promise<PendingApproval[]> {
  let runIds: string[];
  if (options.runId !== undefined) {
    checkRunId(options.runId, "listPendingApprovals");
    runIds = [options.runId];
  } else {
    runIds = (await journal.store.listRuns())
      .filter((r) => r.lastType === "run.interrupted" && runIdProblem(r.runId) === undefined)
      .map((r) => r.runId);
  }
  const out: PendingApproval[] = [];
  for (const runId of runIds)
    out.push(...(await pendingIn(journal, runId, foldEntries(await readJournal(journal, runId)))));
  return out;
}

/** The calls of a folded run that wait for an approval no one gave yet. */
async function pendingIn(journal: Journal, runId: string, state: RunState): Promise<PendingApproval[]> {
  if (state.status !== "interrupted" || state.interruption?.reason !== "approval-pending") return [];
  const listed = (state.interruption.detail as { stepIds?: unknown } | null)?.stepIds;
  if (!Array.isArray(listed)) return [];
  const waiting = listed.filter((s): s is string => typeof s === "string" && !decided(state, s));
  let hydrated = false;
  const out: PendingApproval[] = [];
  for (const stepId of waiting) {
    const parsed = parseFrameId(stepId);
    if (parsed?.kind !== "tool") continue;
    if (responseAt(state, parsed.turn) === undefined && !hydrated) {
      await hydrateArchived(journal, state, { only: "model" }); // the model's response was compacted
      hydrated = true;
    }
    const call: ToolCall | undefined = responseAt(state, parsed.turn)?.toolCalls[parsed.index];
    if (call === undefined) continue;
    const wait = state.approvalRequests[stepId];
    out.push({
      runId,
      stepId,
      toolName: call.name,
      input: call.input,
      inputDigest: digestOfRecorded(call.input).digest,
      requestedAt: new Date(wait?.requestedAt ?? 0).toISOString(),
      ...(wait?.expiresAt === undefined ? {} : { expiresAt: new Date(wait.expiresAt).toISOString() }),
    });
  }
  return out;
}

/** The call's approval was decided, or the call went on without one (settled, started). */
const decided = (state: RunState, stepId: string): boolean =>
  state.decisions[approvalId(stepId)] !== undefined ||
  state.settled[stepId] !== undefined ||
  state.frames[stepId] !== undefined;

/** A person's answer to a pending approval (`recordApproval`). */
export interface RecordApprovalOptions {
  /** true runs the call; false declines it (the model is told, with `reason`). */
  readonly approved: boolean;
  /** Why (journaled; for a decline, also told to the model). */
  readonly reason?: string;
  /** Who answered (journaled beside the decision). */
  readonly by?: string;
  /**
   * The input digest the person saw (`PendingApproval.inputDigest`): the answer is refused
   * (`approvalInputMismatch`) unless the call would run with that input.
   */
  readonly inputDigest?: string;
}

/** What `recordApproval` journaled. */
export interface RecordedApproval {
  readonly runId: string;
  readonly stepId: string;
  readonly toolName: string;
  readonly approved: boolean;
  readonly inputDigest: string | null;
}

/** How long `recordApproval` holds the run while it journals the answer. */
const APPROVAL_LEASE_MS = 10_000;

/**
 * Answers a pending approval from any process: journals the decision (bound to the digest of
 * the input the call will run with) and, for a decline, the call's refusal the model is fed.
 * The next `loop.run({ runId, journal })` goes on with it; on PostgreSQL the run is queued for
 * the workers of its loop, which pick it up by themselves. It takes the run's ownership to write,
 * so it never races a live loop (`RunBusyError` while one runs it). Refused with
 * `ApprovalRefusedError` when the step is not waiting (`approvalNotPending`), was decided
 * already (`approvalDecided`), waits with another input than `inputDigest` says
 * (`approvalInputMismatch`), or has expired (`approvalExpired`).
 *
 * @example
 * const [pending] = await listPendingApprovals(journal, { runId: "order-42" });
 * await recordApproval(journal, "order-42", pending.stepId, {
 *   approved: true,
 *   by: "ana@example.com",
 *   inputDigest: pending.inputDigest ?? undefined,
 * });
 * await loop.run({ runId: "order-42", journal }); // the approved call runs
 */
export async function recordApproval(
  journal: Journal,
  runId: string,
  stepId: string,
  answer: RecordApprovalOptions,
): Promise<RecordedApproval> {
  checkRunId(runId, "recordApproval");
  const { store } = journal;
  const owner = answer.by === undefined ? "recordApproval" : `recordApproval by ${answer.by}`;
  const lease = await store.acquire(runId, { owner, leaseMs: APPROVAL_LEASE_MS });
  try {
    const state = foldEntries(await readJournal(journal, runId));
    if (state.status === "new") {
      throw new RunControlError(
        "runNotFound",
        runId,
        `run ${runId} is not in this journal; check the run id (loom runs)`,
      );
    }
    if (state.status === "cancelled") throw new RunCancelledError(runId, state.cancelled?.reason ?? "");
    const pending = (await pendingIn(journal, runId, state)).find((p) => p.stepId === stepId);
    if (pending === undefined) throw notPending(runId, stepId, state);
    if (answer.inputDigest !== undefined && answer.inputDigest !== pending.inputDigest) {
      throw new ApprovalRefusedError(
        "approvalInputMismatch",
        runId,
        stepId,
        `run ${runId} step ${stepId}: the call waits with input digest ${pending.inputDigest}, not ${answer.inputDigest}; list the pending approvals again (loom approvals) and answer for the input shown`,
      );
    }
    if (pending.expiresAt !== undefined && Date.now() >= Date.parse(pending.expiresAt)) {
      throw new ApprovalRefusedError(
        "approvalExpired",
        runId,
        stepId,
        `run ${runId} step ${stepId}: the approval expired at ${pending.expiresAt} (its tool's approvalTimeoutMs); the run declines the call when it resumes`,
      );
    }
    const choice = {
      approved: answer.approved,
      inputDigest: pending.inputDigest,
      ...(answer.by === undefined ? {} : { by: answer.by }),
      ...(answer.reason === undefined ? {} : { reason: answer.reason }),
    };
    const entries: NewEntry[] = [
      {
        type: "decision.recorded",
        data: { decisionId: approvalId(stepId), source: DECISION_SOURCES.approval, choice },
      },
    ];
    if (!answer.approved) {
      const result = declinedResult(pending.toolName, answer.reason === undefined ? {} : { reason: answer.reason });
      entries.push({ type: "call.settled", data: { stepId, status: "error", reason: "approval-declined", result } });
    }
    await store.append(runId, entries, {
      expectedVersion: state.version,
      fence: lease.token,
      ...(state.loopId === undefined ? {} : { wake: { loopId: state.loopId } }),
    });
    const { toolName, inputDigest } = pending;
    return { runId, stepId, toolName, approved: answer.approved, inputDigest };
  } finally {
    await store.release(lease);
  }
}

/** Why `stepId` cannot be answered: decided already, or not waiting at all. */
function notPending(runId: string, stepId: string, state: RunState): ApprovalRefusedError {
  const decision = state.decisions[approvalId(stepId)];
  if (decision !== undefined) {
    const { approved, by } = (decision.choice ?? {}) as { approved?: unknown; by?: unknown };
    const who = typeof by === "string" ? ` by ${by}` : "";
    return new ApprovalRefusedError(
      "approvalDecided",
      runId,
      stepId,
      `run ${runId} step ${stepId}: its approval was decided already (${approved === true ? "approved" : "declined"}${who}); a decision is made once`,
    );
  }
  return new ApprovalRefusedError(
    "approvalNotPending",
    runId,
    stepId,
    `run ${runId} step ${stepId} does not wait for an approval${state.status === "interrupted" ? "" : ` (the run is ${state.status})`}; list what waits with listPendingApprovals (loom approvals)`,
  );
}

import { digestOfRecorded } from "../../core/digest.ts";
import { isRunBusyError, RunCancelledError } from "../../core/errors.ts";
import { approvalId, checkRunId, childRunId, parseFrameId, runIdProblem } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import type { Journal } from "../../events/spi.ts";
import type { NewEntry, ToolCall } from "../../events/types.ts";
import { foldEntries, type RunState, responseAt } from "../../projections/runState.ts";
import { checkApprovedInput } from "../base/approvedInput.ts";
import { approvalEntries } from "../base/callResult.ts";
import type { Tool } from "../base/config.ts";
import { foldRun, hydrateArchived } from "../base/readers.ts";
import { readRunState } from "../base/snapshots.ts";
import { parentRunOf, type SubRunParent } from "../subruns/subRuns.ts";
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
  /**
   * For a call of a sub-agent (`agentTool`): the parent run and its call that runs `runId`. The
   * answer goes to `runId` (the sub-agent's run, where the call waits); resuming `rootRunId`
   * resumes the chain down to it. Absent for a top-level run's own call.
   */
  readonly parent?: { readonly runId: string; readonly stepId: string };
  /** For a call of a sub-agent: the top-level run of the chain, the one to resume. */
  readonly rootRunId?: string;
}

/**
 * Every tool call waiting for approval: of the runs whose last entry is an `approval-pending`
 * interruption (or of `runId` alone), the calls it lists that no one decided yet, with their
 * input, its digest, and when the approval was asked for and expires. Reads only. A run that waits
 * because a sub-agent (`agentTool`) waits lists the sub-agent's calls, each under the sub-agent's
 * run id with its `parent` and `rootRunId`: answer it with `recordApproval(journal, p.runId,
 * p.stepId, …)`, then resume the root run.
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
  const out = new Map<string, PendingApproval>(); // a sub-agent's call is listed under its run and its parent's
  for (const runId of runIds) {
    const chain = await chainOf(journal, runId);
    for (const p of await pendingIn(journal, runId, await approvalState(journal, runId), chain))
      out.set(`${p.runId}\u0000${p.stepId}`, p);
  }
  return [...out.values()];
}

/**
 * A run's state as far as its pending approvals go: its latest snapshot (a compact one too) plus
 * the entries after it. A compact state holds the frames of the last two turns, where the calls
 * an interruption lists are; should one be older, the run is folded in full.
 */
async function approvalState(journal: Journal, runId: string): Promise<RunState> {
  const { state } = await readRunState(journal, runId, { compact: true });
  const below = state.compacted?.belowTurn;
  if (below === undefined) return state;
  const listed = (state.interruption?.detail as { stepIds?: unknown } | null)?.stepIds;
  const within =
    !Array.isArray(listed) ||
    listed.every((id) => typeof id !== "string" || (parseFrameId(id)?.turn ?? below) >= below);
  return within ? state : foldRun(journal, runId);
}

/** Where a run sits in a chain of sub-agents: its parent's call and the top-level run, if it is a sub-agent's. */
interface Chain {
  readonly parent?: SubRunParent;
  readonly rootRunId?: string;
}

/** The chain of a run read from the journal (a sub-agent's run id is `<parent>/<stepId>`). */
async function chainOf(journal: Journal, runId: string): Promise<Chain> {
  if (!runId.includes("/")) return {};
  const parent = await parentRunOf(journal, runId);
  if (parent === undefined) return {};
  return { parent, rootRunId: (await chainOf(journal, parent.runId)).rootRunId ?? parent.runId };
}

/** The calls of a folded run that wait for an approval no one gave yet, and those of its waiting sub-agents. */
async function pendingIn(
  journal: Journal,
  runId: string,
  state: RunState,
  chain: Chain = {},
): Promise<PendingApproval[]> {
  if (state.status !== "interrupted" || state.interruption?.reason !== "approval-pending") return [];
  const listed = (state.interruption.detail as { stepIds?: unknown } | null)?.stepIds;
  if (!Array.isArray(listed)) return [];
  let hydrated = false;
  const out: PendingApproval[] = [];
  for (const stepId of listed) {
    if (typeof stepId !== "string") continue;
    if (state.frames[stepId]?.status === "started" && !state.settled[stepId]) {
      // A started call that waits: a sub-agent whose run waits for an approval.
      const child = childRunId(runId, stepId);
      const below = { parent: { runId, stepId }, rootRunId: chain.rootRunId ?? runId };
      out.push(...(await pendingIn(journal, child, await approvalState(journal, child), below)));
      continue;
    }
    if (decided(state, stepId)) continue;
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
      ...chain,
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
  /**
   * The clock the approval's expiry is judged by (ms since the epoch; default `Date.now`): the
   * same one the run's `RunOptions.now` and `deliverEvent`'s `now` are, so a test with a fake
   * clock sees an approval expire at the fake time.
   *
   * @example
   * await recordApproval(journal, runId, stepId, { approved: true, now: () => fakeNow });
   */
  readonly now?: () => number;
  /**
   * Approve with this input instead of the model's (edit and approve): checked against `tool`
   * first (its JSON form, then its `validateInput`; `ApprovalInputError` and nothing journaled
   * when refused), journaled with its digest beside the model's, and the call runs with it.
   */
  readonly input?: unknown;
  /** The call's tool (the loop's `tools[name]`), to check `input` against. */
  readonly tool?: Pick<Tool, "validateInput">;
  /** `"run"`: approve every later call of the same tool in this run too, without asking; `"session"`: and in the session's later messages. */
  readonly scope?: "call" | "run" | "session";
}

/** What `recordApproval` journaled. */
export interface RecordedApproval {
  readonly runId: string;
  readonly stepId: string;
  readonly toolName: string;
  readonly approved: boolean;
  /** The digest of the model's input, the one the answer is bound to. */
  readonly inputDigest: string | null;
  /** For an approval with a changed input: the digest of the input the call runs with. */
  readonly approvedInputDigest?: string;
}

/** One answer of {@link recordApprovals}: the call's step id and the answer. */
export interface StepApproval extends RecordApprovalOptions {
  readonly stepId: string;
}

/** How long `recordApproval` holds the run while it journals the answer. */
const APPROVAL_LEASE_MS = 10_000;

/** The owner name of an answer's hold on the run: answers given at once wait for each other by it. */
const ANSWER_OWNER = "recordApproval";

/**
 * Answers a pending approval from any process: journals the decision (bound to the digest of
 * the input the call will run with) and, for a decline, the call's refusal the model is fed.
 * The next `loop.run({ runId, journal })` goes on with it; on PostgreSQL the run is queued for
 * the workers of its loop, which pick it up by themselves (for a sub-agent's call, the top-level
 * run of its chain is queued: resuming it resumes the sub-agent). It takes the run's ownership to write,
 * so it never races a live loop (`RunBusyError` while one runs it); answers given at the same time
 * wait for each other, and only the first is journaled: the others are refused with
 * `approvalDecided`, saying who decided. Refused with
 * `ApprovalRefusedError` when the step is no call of the run (`approvalUnknownStep`), is not waiting (`approvalNotPending`), was decided
 * already (`approvalDecided`), waits with another input than `inputDigest` says
 * (`approvalInputMismatch`), or has expired (`approvalExpired`); with `ApprovalInputError` when
 * `input` (approve with a changed input) is refused by `tool`. A sub-agent's call is answered
 * on the sub-agent's run (`PendingApproval.runId`), never through its parent: the decision is the
 * child's, bound to the child's input; the parent's resume carries it down.
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
  const [recorded] = await recordApprovals(journal, runId, [{ ...answer, stepId }]);
  return recorded as RecordedApproval;
}

/**
 * Answers several pending approvals of a run at once (all the calls of one response, say) in one
 * append: each answer is checked as `recordApproval` checks it, and if any is refused nothing is
 * journaled (all or nothing). Same steps twice in `answers` are refused (`approvalDecided`).
 *
 * @example
 * const pending = await listPendingApprovals(journal, { runId: "order-42" });
 * await recordApprovals(journal, "order-42", pending.map((p) => ({ stepId: p.stepId, approved: true, by: "ana" })));
 */
export async function recordApprovals(
  journal: Journal,
  runId: string,
  answers: readonly StepApproval[],
): Promise<RecordedApproval[]> {
  checkRunId(runId, "recordApprovals");
  const { store } = journal;
  const by = answers.find((a) => a.by !== undefined)?.by;
  const owner = by === undefined ? ANSWER_OWNER : `${ANSWER_OWNER} by ${by}`;
  const lease = await acquireForAnswer(store, runId, owner);
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
    const all = await pendingIn(journal, runId, state);
    const entries: NewEntry[] = [];
    const recorded: RecordedApproval[] = [];
    const seen = new Set<string>();
    for (const answer of answers) {
      const { stepId } = answer;
      const waiting = all.filter((p) => p.stepId === stepId);
      const pending = seen.has(stepId) ? undefined : waiting.find((p) => p.runId === runId);
      if (pending === undefined) {
        if (seen.has(stepId)) throw answeredTwice(runId, stepId);
        throw notPending(runId, stepId, state, waiting[0]?.runId);
      }
      seen.add(stepId);
      checkAnswer(runId, stepId, pending, answer);
      const checked =
        answer.approved && answer.input !== undefined
          ? await checkApprovedInput({ runId, stepId, toolName: pending.toolName }, answer.tool, answer.input)
          : undefined;
      entries.push(
        ...approvalEntries(stepId, pending.toolName, {
          approved: answer.approved,
          inputDigest: pending.inputDigest,
          ...(answer.by === undefined ? {} : { by: answer.by }),
          ...(answer.reason === undefined ? {} : { reason: answer.reason }),
          ...(checked === undefined ? {} : { edited: { input: checked.recorded, inputDigest: checked.inputDigest } }),
          ...(answer.approved && (answer.scope === "run" || answer.scope === "session")
            ? { scope: answer.scope, toolName: pending.toolName }
            : {}),
        }),
      );
      const { toolName, inputDigest } = pending;
      recorded.push({
        runId,
        stepId,
        toolName,
        approved: answer.approved,
        inputDigest,
        ...(checked === undefined ? {} : { approvedInputDigest: checked.inputDigest }),
      });
    }
    if (entries.length === 0) return recorded;
    const wake = await wakeFor(journal, runId, state);
    await store.append(runId, entries, {
      expectedVersion: state.version,
      fence: lease.token,
      ...(wake ? { wake } : {}),
    });
    return recorded;
  } finally {
    await store.release(lease);
  }
}

/** Refuses an answer bound to another input than the call waits with, or given after the approval expired. */
function checkAnswer(runId: string, stepId: string, pending: PendingApproval, answer: RecordApprovalOptions): void {
  if (answer.inputDigest !== undefined && answer.inputDigest !== pending.inputDigest) {
    throw new ApprovalRefusedError(
      "approvalInputMismatch",
      runId,
      stepId,
      `run ${runId} step ${stepId}: the call waits with input digest ${pending.inputDigest}, not ${answer.inputDigest}; list the pending approvals again (loom approvals) and answer for the input shown`,
    );
  }
  if (pending.expiresAt !== undefined && (answer.now?.() ?? Date.now()) >= Date.parse(pending.expiresAt)) {
    throw new ApprovalRefusedError(
      "approvalExpired",
      runId,
      stepId,
      `run ${runId} step ${stepId}: the approval expired at ${pending.expiresAt} (its tool's approvalTimeoutMs); the run declines the call when it resumes`,
    );
  }
}

/** The same step answered twice in one `recordApprovals`: one decision a call. */
const answeredTwice = (runId: string, stepId: string) =>
  new ApprovalRefusedError(
    "approvalDecided",
    runId,
    stepId,
    `run ${runId} step ${stepId}: answered twice in one recordApprovals; a decision is made once, give one answer a call`,
  );

/**
 * The run's ownership for an answer. Another answer holding it (given at the same instant, from
 * here or another process) holds it only while it journals: this one waits for it, then finds the
 * call decided. A live loop's hold is refused at once (`RunBusyError`).
 */
async function acquireForAnswer(store: Journal["store"], runId: string, owner: string) {
  const deadline = Date.now() + APPROVAL_LEASE_MS;
  for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
    try {
      return await store.acquire(runId, { owner, leaseMs: APPROVAL_LEASE_MS });
    } catch (e) {
      if (!isRunBusyError(e) || !e.holder.owner.startsWith(ANSWER_OWNER) || Date.now() >= deadline) throw e;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/**
 * Which run the answer makes worth resuming, for a store that queues runs for workers: the run
 * itself, or for a sub-agent's run the top-level run of its chain (its resume resumes the
 * sub-agent with the answer; a worker need not know the sub-agent's loop, and the parent does not
 * stay behind, waiting, while the child goes on alone).
 */
export async function wakeFor(
  journal: Journal,
  runId: string,
  state: RunState,
): Promise<{ loopId: string; runId?: string } | undefined> {
  const { rootRunId } = await chainOf(journal, runId);
  if (rootRunId !== undefined) {
    const root = foldEntries(await readJournal(journal, rootRunId));
    if (root.loopId !== undefined) return { loopId: root.loopId, runId: rootRunId };
  }
  return state.loopId === undefined ? undefined : { loopId: state.loopId };
}

/**
 * Whether `stepId` is a tool call of the folded run that exists or existed: asked about, decided,
 * started or settled, or at an index of a model response the run recorded.
 */
export function isCallOf(state: RunState, stepId: string): boolean {
  if (
    state.approvalRequests[stepId] !== undefined ||
    state.decisions[approvalId(stepId)] !== undefined ||
    state.frames[stepId] !== undefined ||
    state.settled[stepId] !== undefined
  )
    return true;
  const id = parseFrameId(stepId);
  if (id?.kind !== "tool" || id.loopId !== state.loopId) return false;
  const response = responseAt(state, id.turn);
  // An archived response is not read back here: a turn the run recorded stands for its calls.
  return response === undefined ? id.turn < state.turns : id.index < response.toolCalls.length;
}

/** Why `stepId` cannot be answered: no call of the run, decided already, not waiting at all, or waiting in a sub-agent's run `inSubRun`. */
function notPending(runId: string, stepId: string, state: RunState, inSubRun?: string): ApprovalRefusedError {
  if (inSubRun !== undefined) {
    return new ApprovalRefusedError(
      "approvalNotPending",
      runId,
      stepId,
      `run ${runId} step ${stepId}: the call waits in the sub-agent run ${inSubRun}, not in ${runId}; answer it there (recordApproval(journal, "${inSubRun}", "${stepId}", …), or loom approve --run <that run>), then resume ${runId}`,
    );
  }
  if (!isCallOf(state, stepId)) {
    return new ApprovalRefusedError(
      "approvalUnknownStep",
      runId,
      stepId,
      `run ${runId} has no call ${stepId}: nothing to approve or deny; check the step id (a tool call's, <loop>#turn:<i>:tool:<j>) against listPendingApprovals (loom approvals)`,
    );
  }
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

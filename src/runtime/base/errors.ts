import { errorGuard, LoomError } from "../../core/errors.ts";
import { describeCause } from "../../events/errorCause.ts";
import type { ErrorCause } from "../../events/types.ts";
import { isLeanAgentStep } from "../../projections/toolCallLog.ts";
import type { AgentStep, InterruptedAgentRun, LeanAgentStep, ToolCallLogMode } from "../../projections/types.ts";

/**
 * The run stopped before its answer (aborted, iteration limit, approval pending, model error) and
 * `run.interrupted` is journaled. Call `loop.run({ runId })` again to go on from where it stopped.
 * For a `model-error`, `cause` (also `run.cause`) is the model's error as the journal recorded it:
 * `{ name, message, status?, retryable? }`, the same after a restart.
 *
 * @example
 * try {
 *   await loop.run({ runId, journal, input });
 * } catch (e) {
 *   if (isAgentInterruptedError(e) && e.cause?.status === 401) console.error("check the API key");
 * }
 */
export class AgentInterruptedError<
  M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined,
> extends LoomError {
  /** Where the run stopped: its reason, its log so far and the approvals it waits for. */
  readonly run: InterruptedAgentRun<M>;
  /** For a `model-error`: the model's error as the journal recorded it (also `run.cause`). */
  declare readonly cause: ErrorCause | undefined;
  constructor(run: InterruptedAgentRun<M>) {
    const what =
      run.reason === "approval-pending"
        ? `waiting for approval of ${run.pendingApprovals.map((p) => (p.runId === undefined ? p.stepId : `${p.stepId} (in sub-agent run ${p.runId})`)).join(", ")}; resume with loop.run({ runId: "${run.runId}", approvals: { [stepId]: true | false } })${run.pendingApprovals.some((p) => p.runId !== undefined) ? ` (a sub-agent's call keyed "<runId>/<stepId>" when its step id waits in more than one run), or with recordApproval(journal, runId, stepId, …)` : ""}`
        : run.reason === "max-iterations"
          ? `the iteration limit was reached after ${run.iterations} model calls; raise maxIterations and call loop.run({ runId: "${run.runId}" }) to go on`
          : run.reason === "waiting"
            ? `waiting for ${run.waits.map((w) => `${w.stepId} (${w.kind}${w.until ? ` until ${w.until}` : ""}${w.expiresAt ? `, expires ${w.expiresAt}` : ""})`).join(", ")}; it holds no process: call loop.run({ runId: "${run.runId}" }) (or loom wake) once a wait is due or its event delivered`
            : run.reason === "deadline"
              ? `the run's deadline (timeouts.runMs, journaled when it started) has passed; it will not go on: start a new run`
              : run.cause !== undefined
                ? `the model call failed: ${describeCause(run.cause)}; fix what it says and call loop.run({ runId: "${run.runId}" }) to call the model again`
                : `call loop.run({ runId: "${run.runId}" }) to resume from where it stopped`;
    super("agentInterrupted", `run ${run.runId} interrupted (${run.reason}): ${what}`, { cause: run.cause });
    this.run = run;
  }
}

const interrupted = errorGuard(AgentInterruptedError, { codes: ["agentInterrupted"] });

/**
 * Is `e` an `AgentInterruptedError`? Pass the loop that threw it to type `e.run.toolCallLog` in
 * that loop's mode (lean for `toolCallLog: "lean"`): the guard then also checks that the log's
 * entries are in that mode's shape.
 *
 * @example
 * ```ts
 * const loop = agentLoop$({ id: "support", model, tools, toolCallLog: "lean" });
 * try {
 *   await loop.run({ runId, journal, input, signal });
 * } catch (e) {
 *   if (!isAgentInterruptedError(e, loop)) throw e;
 *   console.log(e.run.reason, e.run.toolCallLog.map((step) => step.stepId)); // LeanAgentStep[]
 * }
 * ```
 */
export function isAgentInterruptedError<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined>(
  e: unknown,
  loop?: { readonly config: { readonly toolCallLog?: M } },
): e is AgentInterruptedError<M> {
  if (!interrupted(e)) return false;
  const mode = loop?.config.toolCallLog;
  if (mode === undefined) return true;
  const log: readonly (AgentStep | LeanAgentStep)[] | undefined = e.run?.toolCallLog;
  return Array.isArray(log) && log.every((step) => isLeanAgentStep(step) === (mode === "lean"));
}

/**
 * A run whose journal holds redacted entries (`withRedaction`) and no way to feed the model what
 * it was fed live: the journal keeps no original of the entry at `seq` (`why: "notKept"`: it was
 * redacted without `keepOriginals`, or it is a claim-checked output), or the originals were kept
 * and their key is gone (`why: "forgotten"`: `forgetRedactedOriginals`, or a journal opened
 * without `keepOriginals`). Thrown before anything is appended; a completed run still resolves to
 * its recorded (redacted) value. Start a new run (or `forkRun` before `seq`, the first redacted
 * entry, and resume the fork).
 *
 * @example
 * try {
 *   await loop.run({ runId, journal });
 * } catch (e) {
 *   if (isRedactedHistoryError(e)) console.error(`run ${e.runId} was redacted at seq ${e.seq} (${e.why})`);
 * }
 */
export class RedactedHistoryError extends LoomError {
  readonly runId: string;
  /** The first redacted entry whose original cannot be opened. */
  readonly seq: number;
  /** Whether no original was kept, or the key that opens them is gone. */
  readonly why: "notKept" | "forgotten";
  constructor(runId: string, seq: number, type: string, why: "notKept" | "forgotten" = "notKept") {
    const because =
      why === "forgotten"
        ? "the originals it kept can no longer be opened (their key was forgotten, or the journal was opened without withRedaction's keepOriginals)"
        : "the journal keeps no original of it (redact with withRedaction(journal, r, { keepOriginals: { codec } }) to keep them)";
    super(
      "redactedHistory",
      `run ${runId} cannot be resumed: its journal was redacted (first at seq ${seq}, ${type}) and ${because}, so the model would not be fed what it was fed live; start a new run, or fork this one before seq ${seq} (forkRun) and resume the fork`,
    );
    this.runId = runId;
    this.seq = seq;
    this.why = why;
  }
}

/**
 * True when `e` is a {@link RedactedHistoryError}.
 *
 * @example
 * if (isRedactedHistoryError(e)) await forkRun(journal, e.runId, { at: e.seq - 1, newRunId });
 */
export const isRedactedHistoryError = errorGuard(RedactedHistoryError, { codes: ["redactedHistory"] });

/**
 * Why a schedule was refused (its cron pattern, its time zone, another setting), or why a tick of it
 * could not be fired (`inputFailed`: its `input(tick)` threw).
 */
export type ScheduleErrorCode = "invalidCron" | "invalidTimezone" | "invalidSchedule" | "inputFailed";

/**
 * A schedule (`schedule({ id, cron, ... })`) that cannot be used: a cron pattern the parser
 * refuses (`invalidCron`), a time zone that is not an IANA name (`invalidTimezone`), or another
 * bad setting (`invalidSchedule`). Thrown when the schedule is made, before anything runs. A tick
 * whose `input(tick)` throws is reported (`onError`) as `inputFailed` and not fired.
 *
 * @example
 * try {
 *   schedule({ id: "digest", cron: "0 9 * * *", timezone: "Europe/Pariss", loop, input: () => "Send the digest" });
 * } catch (e) {
 *   if (isScheduleError(e)) console.error(e.code, e.message); // "invalidTimezone", names the schedule and the fix
 * }
 */
export class ScheduleError extends LoomError {
  declare readonly code: ScheduleErrorCode;
  /** The id of the schedule refused (as given). */
  readonly scheduleId: string;
  constructor(code: ScheduleErrorCode, scheduleId: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.scheduleId = scheduleId;
  }
}

/**
 * True when `e` is a {@link ScheduleError}.
 *
 * @example
 * if (isScheduleError(e) && e.code === "invalidCron") console.error(`fix the pattern of ${e.scheduleId}`);
 */
export const isScheduleError = errorGuard(ScheduleError);

/**
 * An approval with a changed input (edit and approve) whose input the call's tool refuses: it has
 * no JSON form, or the tool's `validateInput` rejects it. Nothing was journaled: the call still
 * waits; answer again with an input the tool takes, or approve the model's own input.
 *
 * @example
 * await recordApproval(journal, runId, stepId, { approved: true, input: { euros: -5 }, tool: refund }).catch((e) => {
 *   if (isApprovalInputError(e)) console.error(e.message); // say so to the person who edited it
 * });
 */
export class ApprovalInputError extends LoomError {
  readonly runId: string;
  readonly stepId: string;
  constructor(runId: string, stepId: string, toolName: string, why: string) {
    super(
      "approvalInputInvalid",
      `run ${runId} step ${stepId}: the input approved in place of the model's is refused by ${toolName} (${why}); nothing was journaled and the call still waits: answer again with an input ${toolName} takes`,
    );
    this.runId = runId;
    this.stepId = stepId;
  }
}

/** Whether `e` is an {@link ApprovalInputError}. */
export const isApprovalInputError = errorGuard(ApprovalInputError, { codes: ["approvalInputInvalid"] });

import { LoomError } from "../core/errors.ts";
import { describeCause } from "../events/errorCause.ts";
import type { ErrorCause } from "../events/types.ts";
import type { InterruptedAgentRun } from "../projections/types.ts";

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
export class AgentInterruptedError extends LoomError {
  readonly run: InterruptedAgentRun;
  declare readonly cause: ErrorCause | undefined;
  constructor(run: InterruptedAgentRun) {
    const what =
      run.reason === "approval-pending"
        ? `waiting for approval of ${run.pendingApprovals.map((p) => p.stepId).join(", ")}; resume with loop.run({ runId: "${run.runId}", approvals: { [stepId]: true | false } })`
        : run.reason === "max-iterations"
          ? `the iteration limit was reached after ${run.iterations} model calls; raise maxIterations and call loop.run({ runId: "${run.runId}" }) to go on`
          : run.cause !== undefined
            ? `the model call failed: ${describeCause(run.cause)}; fix what it says and call loop.run({ runId: "${run.runId}" }) to call the model again`
            : `call loop.run({ runId: "${run.runId}" }) to resume from where it stopped`;
    super("agentInterrupted", `run ${run.runId} interrupted (${run.reason}): ${what}`, { cause: run.cause });
    this.run = run;
  }
}

export const isAgentInterruptedError = (e: unknown): e is AgentInterruptedError => e instanceof AgentInterruptedError;

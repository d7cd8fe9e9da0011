import { LoomError } from "../core/errors.ts";
import type { InterruptedAgentRun } from "../projections/types.ts";

/**
 * The run stopped before its answer (aborted, iteration limit, approval pending, model error) and
 * `run.interrupted` is journaled. Call `loop.run({ runId })` again to go on from where it stopped.
 */
export class AgentInterruptedError extends LoomError {
  readonly run: InterruptedAgentRun;
  constructor(run: InterruptedAgentRun) {
    const what =
      run.reason === "approval-pending"
        ? `waiting for approval of ${run.pendingApprovals.map((p) => p.stepId).join(", ")}; resume with loop.run({ runId: "${run.runId}", approvals: { [stepId]: true | false } })`
        : run.reason === "max-iterations"
          ? `the iteration limit was reached after ${run.iterations} model calls; raise maxIterations and call loop.run({ runId: "${run.runId}" }) to go on`
          : `call loop.run({ runId: "${run.runId}" }) to resume from where it stopped`;
    super("agentInterrupted", `run ${run.runId} interrupted (${run.reason}): ${what}`);
    this.run = run;
  }
}

export const isAgentInterruptedError = (e: unknown): e is AgentInterruptedError => e instanceof AgentInterruptedError;

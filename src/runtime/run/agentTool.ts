import { errorGuard, isRunCancelledError, LoomError } from "../../core/errors.ts";
import { childRunId } from "../../events/ids.ts";
import type { Message } from "../../events/types.ts";
import type { AgentOutput, InterruptedAgentRun } from "../../projections/types.ts";
import type { Tool, ToolContext } from "../base/config.ts";
import { isAgentInterruptedError } from "../base/errors.ts";
import { DEFAULT_LEASE_MS } from "../base/ownership.ts";
import { RunContext } from "../subruns/runContext.ts";
import { markSubAgentTool } from "../subruns/subAgentTools.ts";
import { SubAgentCancelledError, SubAgentPendingError } from "../subruns/subRuns.ts";
import type { AgentLoop } from "./agentLoop.ts";

export { childRunId } from "../../events/ids.ts";

/** Sub-agents nested deeper than this are refused unless `maxDepth` says otherwise. */
export const DEFAULT_MAX_AGENT_DEPTH = 4;
/** Child runs one parent run may have going at once unless `maxConcurrent` says otherwise. */
export const DEFAULT_MAX_CONCURRENT_CHILDREN = 8;

/** How `agentTool` presents a loop to its parent's model, and the limits it keeps. */
export interface AgentToolOptions<I = { prompt: string }> {
  /** What the sub-agent does, told to the parent's model. */
  readonly description: string;
  /** JSON Schema of the input (default: `{ prompt: string }`). */
  readonly inputSchema?: unknown;
  /**
   * The child run's input from the parent model's (default: `input.prompt`, a string input as is,
   * else its JSON text). Must be deterministic: a resumed child is checked against its recorded input.
   */
  readonly input?: (input: I) => string | readonly Message[];
  /** The tool's output from the child's (default: its `content`). */
  readonly output?: (out: AgentOutput) => unknown;
  /** How many sub-agents deep a chain may go, this one included (default 4). */
  readonly maxDepth?: number;
  /** Child runs of this tool one parent run may have going at once (default 8). */
  readonly maxConcurrent?: number;
  /** Ask before starting the sub-agent (see `Tool.requiresApproval`). */
  readonly requiresApproval?: boolean;
  /** A child that has not answered after this many ms is aborted and the call fails (resumable later). */
  readonly timeoutMs?: number;
}

/** What a sub-agent limit refused: too deep a chain, or too many children at once. */
export type SubAgentLimit = "depth" | "fan-out";

/**
 * A sub-agent was refused by a limit of `agentTool` (`maxDepth`, `maxConcurrent`): the call fails
 * and the parent's model is told why. Raise the limit, or have the model do less at once.
 *
 * @example
 * agentTool(researcher, { description: "researches a question", maxDepth: 2, maxConcurrent: 3 });
 */
export class SubAgentLimitError extends LoomError {
  readonly limit: SubAgentLimit;
  readonly runId: string;
  /** Not retried: the same call would be refused the same way. */
  readonly isRetryable = false;
  constructor(limit: SubAgentLimit, runId: string, message: string) {
    super("subAgentLimit", message);
    this.limit = limit;
    this.runId = runId;
  }
}

/**
 * A sub-agent's run stopped before its answer (its iteration limit, a model error): the parent's
 * call fails with the child's reason, and the child run stays in the journal as it stopped
 * (`loop.run({ runId: e.childRunId })` goes on with it). A child waiting for an approval does
 * not fail the call: the parent waits with it (see `agentTool`).
 *
 * @example
 * if (isSubAgentInterruptedError(e)) console.log(e.childRunId, e.child.reason);
 */
export class SubAgentInterruptedError extends LoomError {
  readonly childRunId: string;
  readonly child: InterruptedAgentRun;
  readonly isRetryable = false;
  constructor(child: InterruptedAgentRun) {
    super(
      "subAgentInterrupted",
      `the sub-agent run ${child.runId} stopped (${child.reason}) before its answer; it stays in the journal as it stopped`,
    );
    this.childRunId = child.runId;
    this.child = child;
  }
}

/** Whether `e` is a {@link SubAgentLimitError}. */
export const isSubAgentLimitError = errorGuard(SubAgentLimitError, { codes: ["subAgentLimit"] });
/** Whether `e` is a {@link SubAgentInterruptedError}. */
export const isSubAgentInterruptedError = errorGuard(SubAgentInterruptedError, { codes: ["subAgentInterrupted"] });

/**
 * A tool that runs another loop as a sub-agent: the child run `<parentRunId>/<stepId>` in the
 * parent's journal, with the input the parent's model gave (mapped by `input`), its answer (mapped
 * by `output`) the tool's output. The child is a run like any other, journaled step by step: when
 * the parent resumes after a crash mid-child, the call runs again (its outcome was unknown), which
 * resumes the child where it stopped, its journaled model and tool calls served, never re-run; a
 * finished child only hands its recorded answer back. Aborting the parent aborts the child.
 * A child that stops for an approval stops the parent too (`approval-pending`, its call waiting):
 * `listPendingApprovals(journal, { runId: parent })` lists the child's call under the child's run
 * id, the approval is answered on that run (`recordApproval(journal, pending.runId,
 * pending.stepId, …)`, where the decision is bound to the child's input), and resuming the parent
 * resumes the child with it; no model call is made again at any depth. Or the answer goes with the
 * resume: `parent.run({ runId, journal, approvals })` hands each child the answers meant for it,
 * keyed by the child's step id (`pending.stepId`, when that step waits in one run of the chain only;
 * else `AmbiguousApprovalError`) or by `approvalKey(pending.runId, pending.stepId)`, and the child
 * journals each on its own run.
 * Depth (`maxDepth`) and concurrent children (`maxConcurrent`) are limited: past them the call
 * fails with `SubAgentLimitError`, told to the parent's model. Both are read from the parent's run
 * context (`ToolContext.run`), of which the child run gets a child: its depth one more, and its
 * events, inspector and approval answers the parent's (nothing is kept outside the runs).
 *
 * @example
 * ```ts
 * const researcher = agentLoop$({ id: "researcher", model, tools: { search } });
 * const planner = agentLoop$({
 *   id: "planner",
 *   model,
 *   tools: { research: agentTool(researcher, { description: "Researches a question; give it { prompt }" }) },
 * });
 * await planner.run({ runId: "plan-1", journal, input: "Plan a trip to Lisbon" }); // child: plan-1/planner#turn:0:tool:0
 * ```
 */
export function agentTool<I = { prompt: string }>(loop: AgentLoop, options: AgentToolOptions<I>): Tool<I, unknown> {
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_AGENT_DEPTH;
  const maxConcurrent = options.maxConcurrent ?? DEFAULT_MAX_CONCURRENT_CHILDREN;
  const toInput = options.input ?? defaultInput;
  const toOutput = options.output ?? ((out: AgentOutput) => out.content);
  return markSubAgentTool({
    description: options.description,
    inputSchema: options.inputSchema ?? {
      type: "object",
      properties: { prompt: { type: "string", description: "What the sub-agent is asked" } },
      required: ["prompt"],
    },
    ...(options.requiresApproval ? { requiresApproval: true } : {}),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    // A child run is resumed, never restarted: running the call again is how the parent resumes it.
    onUnknownOutcome: "retry",
    async execute(input: I, context: ToolContext) {
      const { runId, journal, stepId, signal } = context;
      if (runId === undefined || journal === undefined) {
        throw new LoomError(
          "agentToolOutsideRun",
          `agentTool(${loop.config.id}) was called with a context that has no runId or journal: it runs inside a loop's run, so give it to a loop's tools (agentLoop$({ tools: { name: agentTool(…) } })) instead of calling execute yourself`,
        );
      }
      const id = childRunId(runId, stepId);
      // Called by hand with a context the runtime did not make: a run of its own, at depth 0.
      const parent = context.run instanceof RunContext ? context.run : new RunContext(runId);
      const depth = parent.depth + 1;
      if (depth > maxDepth) {
        throw new SubAgentLimitError(
          "depth",
          id,
          `sub-agent ${loop.config.id} (run ${id}) would be ${depth} sub-agents deep; at most ${maxDepth} (agentTool maxDepth): answer without it`,
        );
      }
      const now = parent.going(loop.config.id);
      if (now >= maxConcurrent) {
        throw new SubAgentLimitError(
          "fan-out",
          id,
          `run ${runId} already has ${now} ${loop.config.id} sub-agents going; at most ${maxConcurrent} at once (agentTool maxConcurrent): wait for their answers, then ask again`,
        );
      }
      const child = parent.child(stepId, loop.config.id);
      try {
        // A parent resumed after a crash may find its child's lease still held by the dead process
        // (on another host): wait for it to run out rather than fail the call.
        const ownership = { waitMs: DEFAULT_LEASE_MS };
        const onEvent = parent.nestedListener(); // its events in the parent's stream
        const approvals = parent.approvalsBelow(id); // the parent's answers for it and below
        const inspect = parent.inspectionBelow(stepId); // its chart under the call, in the parent's inspector
        const budget = await parent.budgetFor(stepId); // its share of what the parent has left: its usage counts toward the parent's
        const request = {
          runId: id,
          journal,
          input: toInput(input),
          signal,
          ownership,
          runContext: child,
          ...(onEvent ? { onEvent } : {}),
          ...(approvals ? { approvals } : {}),
          ...(inspect ? { inspect } : {}),
          ...(budget ? { budget } : {}),
        };
        const out = await loop.run(request);
        return toOutput(out);
      } catch (e) {
        // Cancelled on its own (not with the parent, whose signal aborted): the call fails, told to the model.
        if (isRunCancelledError(e) && e.runId === id && !signal.aborted) throw new SubAgentCancelledError(id, e.reason);
        if (isAgentInterruptedError(e) && !signal.aborted) {
          // Waiting for a person: the parent waits too (its call pending), and resuming it resumes the child.
          if (e.run.reason === "approval-pending") throw new SubAgentPendingError(e.run);
          throw new SubAgentInterruptedError(e.run);
        }
        throw e;
      } finally {
        child.end();
      }
    },
  });
}

function defaultInput(input: unknown): string {
  if (typeof input === "string") return input;
  const prompt = (input as { prompt?: unknown } | null)?.prompt;
  return typeof prompt === "string" ? prompt : JSON.stringify(input);
}

/**
 * One run's context in this process: what a run and the sub-agent runs below it share,
 * held by the run itself and handed to its tools (`ToolContext.run`), never registered anywhere
 * global. Made where a run starts (`agentLoop.ts`), or by `agentTool` for the child run it starts
 * (`parent.child(...)`), and dropped with the run: nothing outlives it.
 */

import type { AnyActorRef, InspectionEvent, Observer } from "xstate";
import { childRunId } from "../../events/ids.ts";
import type { Budget } from "../../policies/budget.ts";
import type { RunEvent } from "../../projections/events.ts";
import type { InterruptedAgentRun } from "../../projections/types.ts";
import type { ToolRun } from "../../tools/spi.ts";
import type { RunEventEmitter } from "../streaming/events.ts";
import { type ApprovalAnswers, answersBelow } from "./subRunApprovals.ts";
import { inspectorBelow, type RunInspector } from "./subRunInspect.ts";

/** What a run's context reads of its budget (`RunContext.useBudget`). */
export interface RunBudgetView {
  /** What is left of the budget, sub-agents' usage counted. */
  left(): Promise<Budget | undefined>;
  /** The budget of the sub-agent run that the call `stepId` starts. */
  share(stepId: string): Promise<Budget | undefined>;
}

/** A pending approval as `AgentInterruptedError.run.pendingApprovals` lists it. */
export type InterruptedApproval = InterruptedAgentRun["pendingApprovals"][number];

/**
 * The run a tool call belongs to, in this process: its run id, how many sub-agents deep it is, the
 * run that started it as a sub-agent (`parent`) and the sub-agent runs it has going now
 * (`children`). `agentTool` starts its child run with a child of it; the run's event listeners,
 * inspector and the approval answers meant for the runs below it are kept here too, for them.
 *
 * @example
 * ```ts
 * const where: Tool = {
 *   description: "tells how deep in a chain of sub-agents it runs",
 *   execute: (_input, { run }) => ({ runId: run?.runId, depth: run?.depth ?? 0, parent: run?.parent?.runId }),
 * };
 * ```
 */
export class RunContext implements ToolRun {
  /** The sub-agent runs going now (started by this run's `agentTool` calls), each removed when its call ends. */
  readonly #children = new Set<RunContext>();
  /** The run's events, once it runs: a child's go to its listeners (`onEvent`, `loop.stream`). */
  #events: RunEventEmitter | undefined;
  /** The run's inspector and root actor, when the run is inspected: a child's chart is shown under the call. */
  #inspector: RunInspector | undefined;
  /** The approval answers the run was given (`run({ approvals })`, resolved): a child is handed its own. */
  #approvals: ApprovalAnswers | undefined;
  /** The children's pending approvals, by the step id of the call that waits with them. */
  readonly #waiting = new Map<string, readonly InterruptedApproval[]>();
  /** The run's budget once it runs: what is left of it, and the share a sub-agent's call starts its child with. */
  #budget: RunBudgetView | undefined;

  /**
   * @param runId the run's id
   * @param depth how many sub-agents deep (0: a run started by `loop.run`)
   * @param parent the run whose `agentTool` call started this one
   * @param stepId the parent's call that runs this one
   * @param loopId the loop this run is a run of (how `agentTool` counts its children per loop)
   */
  constructor(
    readonly runId: string,
    readonly depth = 0,
    readonly parent?: RunContext,
    readonly stepId?: string,
    readonly loopId?: string,
  ) {}

  /**
   * The context of the sub-agent run the call `stepId` starts with loop `loopId`: one deeper,
   * held in {@link children} until {@link end} is called.
   */
  child(stepId: string, loopId: string): RunContext {
    const child = new RunContext(childRunId(this.runId, stepId), this.depth + 1, this, stepId, loopId);
    this.#children.add(child);
    return child;
  }

  /** The sub-agent run's call ended: its parent no longer holds it. */
  end(): void {
    if (this.parent !== undefined) this.parent.#children.delete(this);
  }

  /** The sub-agent runs going now (started by this run's `agentTool` calls), each gone once its call ends. */
  get children(): ReadonlySet<RunContext> {
    return this.#children;
  }

  /** Children of loop `loopId` going now. */
  going(loopId: string): number {
    let n = 0;
    for (const c of this.#children) if (c.loopId === loopId) n++;
    return n;
  }

  /**
   * The run is going in this process: its events, its inspector (with its root actor) and the
   * answers it was given become its children's. Called where the run's actor is made
   * (`agentLoop.ts`); returns the removal, called where it ends.
   *
   * @internal
   */
  attach(
    events: RunEventEmitter,
    approvals: ApprovalAnswers | undefined,
    inspect: Observer<InspectionEvent> | ((event: InspectionEvent) => void) | undefined,
    actor: AnyActorRef,
  ): () => void {
    this.#events = events;
    this.#approvals = approvals;
    this.#inspector =
      inspect === undefined
        ? undefined
        : { tell: typeof inspect === "function" ? inspect : (event) => inspect.next?.(event), actor };
    return () => {
      this.#events = undefined;
      this.#approvals = undefined;
      this.#inspector = undefined;
    };
  }

  /**
   * The `onEvent` of a sub-agent run: its events told to this run's listeners, when something
   * watches this run (else none, and the child streams no deltas for no one).
   */
  nestedListener(): ((event: RunEvent) => void) | undefined {
    const events = this.#events;
    if (events === undefined || !events.watched()) return undefined;
    return (event) => events.emitNested(event);
  }

  /** The answers meant for the sub-agent run `childId` and the runs below it, or undefined. */
  approvalsBelow(childId: string): ApprovalAnswers | undefined {
    return answersBelow(this.#approvals, childId);
  }

  /** The `inspect` of the sub-agent run of call `stepId`, or undefined when this run is not inspected. */
  inspectionBelow(stepId: string): ((event: InspectionEvent) => void) | undefined {
    return this.#inspector === undefined ? undefined : inspectorBelow(this.#inspector, stepId);
  }

  /** The run's budget less what it used, sub-agents included (undefined without a budget). */
  budgetLeft(): Promise<Budget | undefined> {
    return this.#budget?.left() ?? Promise.resolve(undefined);
  }

  /**
   * The budget the sub-agent run of this run's call `stepId` starts with (undefined without a
   * budget): its share of what the run had left when the model asked for it, split evenly with the
   * other sub-agents the same response started, so that together they never spend past the run's
   * limits. `agentTool` starts its child with it; the same call gets the same share on a resume.
   */
  budgetFor(stepId: string): Promise<Budget | undefined> {
    return this.#budget?.share(stepId) ?? Promise.resolve(undefined);
  }

  /**
   * Where {@link budgetLeft} and {@link budgetFor} read the run's budget from (`agentLoop.ts`, once the run goes).
   *
   * @internal
   */
  useBudget(budget: RunBudgetView): void {
    this.#budget = budget;
  }

  /** Keeps a waiting child's pending approvals for this run's interruption (`subRunWaits`). */
  childWaits(stepId: string, approvals: readonly InterruptedApproval[]): void {
    this.#waiting.set(stepId, approvals);
  }

  /** The approvals the call `stepId` waits for in its sub-agent, or undefined when it is no waiting sub-agent. */
  waitingBelow(stepId: string): readonly InterruptedApproval[] | undefined {
    return this.#waiting.get(stepId);
  }
}

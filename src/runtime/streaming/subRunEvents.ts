/**
 * Sub-agents' events inside their parent's: a child run's `RunEvent`s reach the
 * parent's `onEvent` / `loop.stream` (in the process that runs both) and the parent's `followRun`
 * (from any process), unchanged: each keeps its own `runId`, the child's `<parentRunId>/<stepId>`,
 * which is how a reader tells them from the parent's and nests them under the call (`subRunPath`).
 * In-process, a child's events reach its parent's listeners through the parent's run context
 * (`RunContext.nestedListener`); this file is how readers nest them, and how `followRun` follows them.
 */

import { childRunId, runsBelowPrefix, subRunSteps } from "../../events/ids.ts";
import type { Journal } from "../../events/spi.ts";
import type { JournalEntry } from "../../events/types.ts";
import type { RunEvent } from "../../projections/events.ts";
import type { ToolCallLogMode } from "../../projections/types.ts";

/**
 * Where an event sits below the run you watch: the step ids of the calls from `rootRunId` down
 * to the sub-agent's run that produced it (`[]` for the root's own events, undefined for an event
 * of another run). A UI nests a sub-agent's events under the call `path[0]` of the root.
 *
 * @example
 * subRunPath("trip", { runId: "trip/planner#turn:0:tool:0/researcher#turn:1:tool:2" } as RunEvent);
 * // ["planner#turn:0:tool:0", "researcher#turn:1:tool:2"]
 */
export function subRunPath(rootRunId: string, event: Pick<RunEvent, "runId">): string[] | undefined {
  return subRunSteps(rootRunId, event.runId);
}

const newFollower = (): Follower => ({ stop: new AbortController(), saw: false, done: false });

/** What `followRun` follows a sub-agent's run with. */
export type FollowChild = (
  journal: Journal,
  runId: string,
  options: { readonly signal: AbortSignal; readonly mode?: ToolCallLogMode; readonly pollMs?: number },
) => AsyncIterable<RunEvent>;

/** One sub-agent run followed for its parent's follower. */
interface Follower {
  readonly stop: AbortController;
  /** It gave an event: the child run exists, and ends on its own. */
  saw: boolean;
  done: boolean;
}

/**
 * The sub-agent runs a `followRun` follows beside its run: one per tool call the run starts (a
 * call that is no sub-agent has no child run, and its follower is stopped once the call ends),
 * their events queued for the parent's follower to give in turn.
 */
export class NestedFollowers {
  /** Events of the children, in the order they came, for the parent's follower to give. */
  readonly queue: RunEvent[] = [];
  private readonly followers = new Map<string, Follower>();
  /** Calls started before the cursor the follower resumed after, still going: followed once caught up. */
  private readonly open = new Set<string>();
  /**
   * Calls whose start was given in the batch being read: followed live only if the batch ends with
   * them still going. A call that also ended in the batch (a replay, a follower catching up) is
   * looked up once instead: most calls run no sub-agent, and a follower for each would cost a
   * follow of its own (a watch, reads) per call.
   */
  private readonly startedInBatch = new Set<string>();
  /** Whether the journal holds a child run for each call of the batch being read (see {@link lookUp}). */
  private readonly hasChild = new Map<string, boolean>();

  constructor(
    private readonly journal: Journal,
    private readonly runId: string,
    private readonly options: { readonly mode?: ToolCallLogMode; readonly pollMs?: number },
    private readonly follow: FollowChild,
    private readonly wake: () => void,
  ) {}

  /**
   * Told each event of the run, given (`shown`) or skipped as before the cursor. Returns, when the
   * children's events must come before this one (the end of a call, or of the run), whether they
   * are still coming: the caller gives the queue until it says no.
   */
  seen(event: RunEvent, shown: boolean): (() => boolean) | undefined {
    switch (event.type) {
      case "tool-started":
        if (shown) this.startedInBatch.add(event.stepId);
        else this.open.add(event.stepId);
        return undefined;
      case "tool-finished":
      case "call-settled": {
        this.open.delete(event.stepId);
        if (this.startedInBatch.delete(event.stepId)) {
          // Started and ended in what was read: its child run, if it ran one, has ended too.
          if (!shown || this.hasChild.get(event.stepId) === false) return undefined;
          const f = this.startIfRan(event.stepId);
          return () => !f.done || this.queue.length > 0;
        }
        this.callEnded(event.stepId);
        const f = this.followers.get(event.stepId);
        return shown && f !== undefined ? () => !f.done || this.queue.length > 0 : undefined;
      }
      case "run-completed":
      case "run-interrupted":
      case "run-cancelled":
      case "run-failed":
        // Calls started in this batch and never ended (a call pending in its sub-agent): looked up now.
        for (const stepId of this.startedInBatch) if (this.hasChild.get(stepId) !== false) this.startIfRan(stepId);
        this.startedInBatch.clear();
        this.runEnded();
        return shown ? () => this.active || this.queue.length > 0 : undefined;
      default:
        return undefined;
    }
  }

  /**
   * Before a batch is given: looks up, all at once, which of its tool calls ran a child run, so the
   * calls that ran none (most) cost no wait of their own while the batch is given.
   */
  async lookUp(entries: readonly JournalEntry[]): Promise<void> {
    this.hasChild.clear();
    const steps: string[] = [];
    for (const e of entries)
      if (e.type === "frame.started" && e.data.effect.startsWith("tool:")) steps.push(e.data.frameId);
    if (steps.length === 0) return;
    // One listing of the runs under this one (a range of the run id index where the store has
    // one), instead of a read per call: most calls run no child.
    const prefix = runsBelowPrefix(this.runId);
    let children: Set<string>;
    try {
      const runs = await this.journal.store.listRuns({ prefix });
      children = new Set(runs.map((r) => r.runId).filter((id) => id.startsWith(prefix)));
    } catch {
      children = new Set(); // children that cannot be listed are left out, as unreadable ones were
    }
    for (const stepId of steps) this.hasChild.set(stepId, children.has(childRunId(this.runId, stepId)));
  }

  /** The journal read so far is given: follow the calls still going that started before the cursor. */
  caughtUp(): void {
    for (const stepId of this.open) this.start(stepId);
    this.open.clear();
    for (const stepId of this.startedInBatch) this.start(stepId); // still going: followed live
    this.startedInBatch.clear();
  }

  /** Children still followed. */
  get active(): boolean {
    for (const f of this.followers.values()) if (!f.done) return true;
    return false;
  }

  /** The run ended: calls that ran no child run are stopped; children end on their own. */
  runEnded(): void {
    for (const stepId of this.followers.keys()) this.callEnded(stepId);
  }

  /** Stops every child follower. */
  stop(): void {
    for (const f of this.followers.values()) f.stop.abort();
  }

  private start(stepId: string, follower: Follower = newFollower()): void {
    const known = this.followers.get(stepId);
    if (known !== undefined && known !== follower) return;
    this.followers.set(stepId, follower);
    const child = childRunId(this.runId, stepId);
    const events = this.follow(this.journal, child, { ...this.options, signal: follower.stop.signal });
    void (async () => {
      try {
        for await (const event of events) {
          follower.saw = true;
          this.queue.push(event);
          this.wake();
        }
      } catch {
        // A child that cannot be read is left out; the run's own events go on.
      } finally {
        follower.done = true;
        this.wake();
      }
    })();
  }

  /** A call that has ended: its child run is followed (to its end) if the journal holds one. */
  private startIfRan(stepId: string): Follower {
    const follower = newFollower();
    this.followers.set(stepId, follower);
    const none = () => {
      follower.done = true; // no child run (or one that cannot be read: left out)
      this.wake();
    };
    void this.journal.store.read(childRunId(this.runId, stepId), { from: 1 }).then((entries) => {
      if (entries.length === 0 || follower.stop.signal.aborted) none();
      else this.start(stepId, follower);
    }, none);
    return follower;
  }

  /** A call ended: its child run, if it has one, has ended too; a call without one stops being followed. */
  private callEnded(stepId: string): void {
    const follower = this.followers.get(stepId);
    if (follower === undefined || follower.saw || follower.done) return;
    const child = childRunId(this.runId, stepId);
    void this.journal.store.read(child, { from: 1 }).then(
      (entries) => {
        if (entries.length === 0) follower.stop.abort();
      },
      () => follower.stop.abort(),
    );
  }
}

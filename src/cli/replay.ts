import { setTimeout as sleep } from "node:timers/promises";
import type { AnyActorRef, InspectionEvent } from "xstate";
import { digestOfRecorded } from "../core/digest.ts";
import { childRunId as childRunIdOf, runsBelowPrefix } from "../events/ids.ts";
import {
  type AgentLoopConfig,
  isAgentInterruptedError,
  isRunCancelledError,
  type Journal,
  type LeanAgentStep,
  type ModelResponse,
  memoryStore,
  RunCancelledError,
  type RunRequest,
  readJournal,
  rebuildToolCallLog,
  type Tool,
} from "../index.ts";
import {
  approvalId,
  type EventStore,
  foldEntries,
  hydrateArchived,
  type JournalEntry,
  modelFrameId,
  parseFrameId,
  type RunState,
  recordedModePin,
  SCHEMA_VERSION,
} from "../journal.ts";
import type { ToolCallInput } from "../machines/toolCall.machine.ts";
import { toolCallResult } from "../projections/toolCallLog.ts";
import { replayRecording } from "../runtime/run/agentLoop.ts";
import { RunContext } from "../runtime/subruns/runContext.ts";

/**
 * Replays a recorded run through the real statecharts, for an inspector to watch: the run's
 * entries, but its last (`run.completed`, `run.interrupted`), are copied into an in-memory journal
 * and the loop runs on that copy as a resume would, every step served from the journal by the
 * durable step. Nothing recorded is executed again and the run's own journal is only read. The
 * stand-in model and tools answer only where the recording stops: the walk stops there the way
 * the run did (a pending approval, the iteration limit, the deadline, the model's last error), or,
 * where the run was cut off mid-step, with "the recording ends here". A call that ran a sub-agent
 * has its child run replayed the same way when the walk reaches the call, its chart shown under
 * the call's (as a live run's inspector shows it), and the walk goes on to the next model response
 * once the child's replay is done: a chain is one actor tree, at any depth.
 */

export interface ReplayResult {
  /** How the replay ended: completed, or interrupted with a reason. */
  readonly ended: string;
  readonly turns: number;
  /** Lean entries of the replay whose status and digest equal the recorded run's, out of `of`. */
  readonly matching: number;
  readonly of: number;
  /**
   * The sub-agent runs of the run's calls (`<runId>/<stepId>`), each replayed where its call is,
   * its chart under the call's in the inspector, in the order their calls came.
   */
  readonly subRuns: readonly ({ readonly runId: string } & ReplayResult)[];
}

const ABORT = Symbol("the recording ends here");

/**
 * @param journal the run's journal (only read; its blobs and archive serve claim-checked and archived outputs)
 * @param entries the run's entries, as `readJournal` gives them
 * @param state their fold, archived frames hydrated (`hydrateArchived`)
 * @param recorded the run's lean log, to compare the replay with
 * @example
 * const result = await replayRun(journal, entries, state, lean, { inspect: inspector.inspect });
 */
export async function replayRun(
  journal: Journal,
  entries: readonly JournalEntry[],
  state: RunState,
  recorded: readonly LeanAgentStep[],
  options: { readonly inspect: NonNullable<RunRequest["inspect"]>; readonly paceMs?: number },
): Promise<ReplayResult> {
  const loopId = state.loopId ?? "?";
  const runId = state.runId ?? "?";
  const last = entries.at(-1);
  const ended = last?.type === "run.completed" || last?.type === "run.interrupted" || last?.type === "run.cancelled";
  const replayJournal: Journal = {
    store: scratchStore(ended ? entries.slice(0, -1) : entries),
    ...(journal.blobs ? { blobs: journal.blobs } : {}),
    ...(journal.archive ? { archive: journal.archive } : {}),
  };
  const stop = new AbortController();
  // A run cancelled from outside (cancelRun) is walked to where the cancel found it, then stopped
  // the way the cancel stopped it: through the chart's own cancel path, not as "the recording ends".
  const cancelledFor = last?.type === "run.cancelled" ? last.data.reason : undefined;
  // Where the recording has nothing more: the walk stops there.
  const hold = async (signal: AbortSignal): Promise<never> => {
    stop.abort(cancelledFor === undefined ? ABORT : new RunCancelledError(runId, cancelledFor));
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    throw new Error("the recording ends here");
  };
  const turns = recordedTurns(state, loopId);
  const interruption = state.interruption;
  const model = {
    async generate({ signal }: { signal: AbortSignal }) {
      // The run ended on the model's error: the walk ends on it too (one attempt, no retry).
      if (interruption?.reason === "model-error" && interruption.cause) {
        throw Object.assign(new Error(interruption.cause.message), {
          name: interruption.cause.name,
          ...(interruption.cause.status === undefined ? {} : { statusCode: interruption.cause.status }),
          isRetryable: false,
        });
      }
      return hold(signal);
    },
  };
  const tools: Record<string, Tool> = Object.fromEntries(
    recordedTools(state).map((name): [string, Tool] => [
      name,
      {
        description: `serves the outputs ${name} recorded`,
        ...(asksApproval(state, name) ? { requiresApproval: true } : {}),
        execute: (_input, { signal }) => hold(signal),
      },
    ]),
  );
  const pin = recordedModePin(state);
  const config: AgentLoopConfig = {
    id: loopId,
    model,
    tools,
    maxIterations: interruption?.reason === "max-iterations" ? Math.max(1, turns) : turns + 1,
    retry: { model: { maxAttempts: 1 } },
    searchTools: false,
    ...(pin ? { toolCallLog: pin } : {}),
  };
  const subRuns = new SubRunReplays(journal, runId, options);
  let how = "completed";
  try {
    await replayRecording(config, {
      runId,
      journal: replayJournal,
      runContext: subRuns.context,
      signal: stop.signal,
      inspect: subRuns.inspect,
      // Before each model response: the pause asked for, and the sub-agents of the calls before it.
      async pace() {
        if (options.paceMs) await sleep(options.paceMs);
        await subRuns.settled();
      },
    });
  } catch (e) {
    if (isRunCancelledError(e)) how = `cancelled (${e.reason})`;
    else if (!isAgentInterruptedError(e)) throw e;
    else
      how = `interrupted (${e.run.reason === "aborted" && stop.signal.reason === ABORT ? "the recording ends here" : e.run.reason})`;
  }
  // Cancelled while it waited (an approval, the iteration limit): the walk ends where the run
  // stood, and the cancel came after.
  if (cancelledFor !== undefined && !how.startsWith("cancelled")) how = `${how}, then cancelled (${cancelledFor})`;
  // Each recorded result as the walk served it, hashed again: an output that no longer hashes to
  // the digest its frame recorded (an altered journal) does not match.
  const walked = foldEntries(await readJournal(replayJournal, runId));
  await hydrateArchived(replayJournal, walked);
  const matching = recorded.filter((e) => {
    const served = toolCallResult(walked, e.stepId);
    return served?.status === e.status && digestOfRecorded(served.output).digest === e.digest;
  }).length;
  return { ended: how, turns, matching, of: recorded.length, subRuns: await subRuns.settled() };
}

type Inspect = NonNullable<RunRequest["inspect"]>;
type SubRunReplay = { readonly runId: string } & ReplayResult;

/**
 * A replay's sub-agents: watches the replay's inspection events for its own calls (the plain
 * calls its chart hands its `plainCalls` actor, and each call that runs as a chart of its own)
 * and replays the child run of each call that has one, told to the parent's inspector under the call.
 */
class SubRunReplays {
  readonly #tell: (event: InspectionEvent) => void;
  /** The replay's root actor, once its first event names it: the calls watched are its own. */
  #root: string | undefined;
  readonly #started = new Set<string>();
  /** One a call reached: its child run's replay, or undefined for a call that ran none. */
  readonly #replays: Promise<SubRunReplay | undefined>[] = [];
  /** The runs below this one, listed once (a run of thousands of calls reads no journal per call). */
  #below: Promise<Set<string>> | undefined;
  /** The replayed run's context: its inspector shows each child's chart under the call. */
  readonly context: RunContext;

  constructor(
    private readonly journal: Journal,
    private readonly runId: string,
    private readonly options: { readonly inspect: Inspect; readonly paceMs?: number },
  ) {
    const given = options.inspect;
    this.#tell = typeof given === "function" ? given : (event) => given.next?.(event);
    this.context = new RunContext(runId);
  }

  readonly inspect = (event: InspectionEvent): void => {
    this.#tell(event);
    this.#root ??= event.rootId;
    if (event.type === "@xstate.event" && event.event.type === "CALLS.RUN") {
      if (event.sourceRef?.sessionId !== this.#root) return; // a sub-agent's own calls: its replay watches them
      for (const call of (event.event as unknown as { calls: readonly ToolCallInput[] }).calls)
        this.#reached(call.stepId);
    } else if (event.type === "@xstate.actor") {
      const actor = event.actorRef as AnyActorRef & { _parent?: AnyActorRef };
      if (!/^call:\d+$/.test(actor.id) || actor._parent?.sessionId !== this.#root) return;
      const input = (actor as { options?: { input?: Partial<ToolCallInput> } }).options?.input;
      if (typeof input?.stepId === "string") this.#reached(input.stepId);
    }
  };

  /** Every child replay started so far, done (a failed one rejects). */
  async settled(): Promise<SubRunReplay[]> {
    for (let n = 0; n !== this.#replays.length; ) {
      n = this.#replays.length;
      await Promise.all(this.#replays); // a child's replay may have started while the others ran
    }
    return (await Promise.all(this.#replays)).filter((r): r is SubRunReplay => r !== undefined);
  }

  #reached(stepId: string): void {
    const childRunId = childRunIdOf(this.runId, stepId);
    if (this.#started.has(childRunId)) return;
    this.#started.add(childRunId);
    const replay = this.#replay(childRunId, stepId);
    replay.catch(() => {}); // handled where it is awaited (settled): not an unhandled rejection meanwhile
    this.#replays.push(replay);
  }

  async #replay(childRunId: string, stepId: string): Promise<SubRunReplay | undefined> {
    this.#below ??= this.journal.store
      .listRuns({ prefix: runsBelowPrefix(this.runId) })
      .then((runs) => new Set(runs.map((r) => r.runId)));
    if (!(await this.#below).has(childRunId)) return undefined; // a call that ran no sub-agent
    const entries = await readJournal(this.journal, childRunId);
    const state = foldEntries(entries);
    await hydrateArchived(this.journal, state);
    const lean = await rebuildToolCallLog(this.journal, childRunId, "lean");
    // The parent's replay runs with this context, its inspector in it: the child's chart goes under the call.
    const below = this.context.inspectionBelow(stepId) ?? this.#tell;
    const result = await replayRun(this.journal, entries, state, lean, { ...this.options, inspect: below });
    return { runId: childRunId, ...result };
  }
}

/** How many model responses the recording holds, from turn 0. */
function recordedTurns(state: RunState, loopId: string): number {
  let turn = 0;
  while (state.frames[modelFrameId(loopId, turn)]?.status === "completed") turn++;
  return turn;
}

/** The tool names the recording knows: those the run started with, and every tool frame's. */
function recordedTools(state: RunState): string[] {
  const names = new Set(state.tools);
  for (const frame of Object.values(state.frames)) {
    if (frame.effect.startsWith("tool:")) names.add(frame.effect.slice("tool:".length));
  }
  return [...names];
}

/**
 * Whether some call of the tool asked for approval in the recording: by an approval decision, or
 * by being pending when the run interrupted (`approval-pending` names its steps). A tool that asks
 * asks for every call.
 */
function asksApproval(state: RunState, name: string): boolean {
  const asked = Object.keys(state.decisions)
    .filter((id) => id.endsWith(APPROVAL))
    .map((id) => id.slice(0, -APPROVAL.length));
  if (state.interruption?.reason === "approval-pending") {
    const { stepIds } = (state.interruption.detail ?? {}) as { stepIds?: unknown };
    if (Array.isArray(stepIds)) asked.push(...stepIds.filter((id): id is string => typeof id === "string"));
  }
  return asked.some((stepId) => calledTool(state, stepId) === name);
}

const APPROVAL = approvalId("");

/** The tool name of a tool step (`<loop>#turn:<i>:tool:<j>`), read from turn i's recorded response. */
function calledTool(state: RunState, stepId: string): string | undefined {
  const step = parseFrameId(stepId);
  if (step?.kind !== "tool") return undefined;
  const response = state.frames[modelFrameId(step.loopId, step.turn)]?.output as ModelResponse | undefined;
  return response?.toolCalls?.[step.index]?.name;
}

/**
 * The replay's journal: the recorded entries as they are (their seqs kept: a compacted run's
 * `frames.archived` marker names seqs), then whatever the walk appends, in memory only.
 */
function scratchStore(recorded: readonly JournalEntry[]): EventStore {
  const owners = memoryStore(); // ownership only
  const entries = [...recorded];
  let version = recorded.at(-1)?.seq ?? 0;
  return {
    acquire: owners.acquire,
    renew: owners.renew,
    release: owners.release,
    async append(runId, added, { expectedVersion }) {
      if (expectedVersion !== version)
        throw new Error(`replay of run ${runId}: expected version ${version}, got ${expectedVersion}`);
      const meta = { v: SCHEMA_VERSION, at: new Date().toISOString() };
      for (const e of added) {
        entries.push({
          runId,
          seq: ++version,
          type: e.type,
          data: JSON.parse(JSON.stringify(e.data)),
          meta,
        } as JournalEntry);
      }
      return { version };
    },
    async read(runId, options) {
      const from = options?.from ?? 1;
      return entries.filter((e) => e.runId === runId && e.seq >= from);
    },
    async listRuns() {
      const last = entries.at(-1);
      return last ? [{ runId: last.runId, version, lastType: last.type, entries: entries.length }] : [];
    },
    async compact(runId) {
      throw new Error(`replay of run ${runId}: its in-memory copy is never compacted`);
    },
    async requestCancel(runId) {
      throw new Error(`replay of run ${runId}: its in-memory copy is never cancelled`);
    },
    async close() {},
  };
}

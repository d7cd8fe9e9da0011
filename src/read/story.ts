import {
  listPendingApprovals,
  type OpenJournal,
  type PendingApproval,
  type RunActivity,
  type RunWait,
  readJournal,
} from "../index.ts";
import {
  type ArchivedFrame,
  childRunId,
  type ForkedFromData,
  foldEntries,
  type JournalEntry,
  type RunState,
  type RunStatus,
  readArchived,
} from "../journal.ts";
import { parentRunOf } from "../runtime/subruns/subRuns.ts";
import { runInfo } from "./runInfo.ts";
import { type CallView, runViewOf, turnsOf } from "./runView.ts";
import {
  type CallStepStatus,
  callStatus,
  type ModelStepStatus,
  modelStatus,
  type RunEnd,
  runEnd,
  waitsOf,
} from "./timeline.ts";

/**
 * A run's story for `loom show <runId>`: its turns (the model's text, its tokens and time), each
 * tool call with its status, time and bytes, approvals, and how the run stopped. Built from the
 * journal alone (archived frames are read back for their times and texts).
 */
export interface RunStory {
  readonly runId: string;
  readonly loopId: string | undefined;
  readonly status: RunStatus;
  readonly startedAt: string | undefined;
  readonly updatedAt: string | undefined;
  readonly forkedFrom?: ForkedFromData;
  /** For a sub-agent's run (`agentTool`): the parent run and its call that runs this one. */
  readonly parent?: { readonly runId: string; readonly stepId: string };
  readonly turns: readonly StoryTurn[];
  readonly tokens: { readonly input: number; readonly output: number };
  readonly pendingApprovals: readonly PendingApproval[];
  /** The run's sleeps and event waits, as the timeline folds them ({@link waitsOf}). */
  readonly waits: readonly RunWait[];
  readonly ended?: StoryEnd;
}

export interface StoryTurn {
  readonly turn: number;
  readonly stepId: string;
  /** How the model call stands, in the timeline's words (`modelStatus`). */
  readonly status: ModelStepStatus;
  readonly durationMs?: number;
  readonly text?: string;
  readonly usage?: { readonly inputTokens?: number; readonly outputTokens?: number };
  /** Failed attempts of the model call. */
  readonly failedAttempts?: number;
  readonly tools: readonly StoryTool[];
}

export interface StoryTool {
  readonly stepId: string;
  readonly toolName: string;
  /** How the call stands, in the timeline's words (`callStatus`). */
  readonly status: CallStepStatus;
  /** Why it was settled without running (a refusal, a declined approval, a built-in). */
  readonly reason?: string;
  readonly durationMs?: number;
  readonly bytes?: number;
  readonly approval?: CallView["approval"];
  /** The input the model asked the call with (shown beside an edited approval's). */
  readonly input?: unknown;
  /** Times the tool ran again after a run of it was cut off before its outcome was recorded (`CallView.reruns`). */
  readonly reruns?: number;
  /** The sub-agent's run the call runs (`agentTool`: `<runId>/<stepId>`), as it stands. */
  readonly subRun?: StorySubRun;
}

/** A sub-agent's run under the call that runs it: `loom show <runId>` of it tells its story. */
export interface StorySubRun {
  readonly runId: string;
  readonly loopId: string | undefined;
  readonly status: RunStatus;
  /** Model calls it made. */
  readonly iterations: number;
}

/** How the run ended (the timeline's {@link RunEnd}). */
export type StoryEnd = RunEnd;

/**
 * Reads a run's story (see {@link RunStory}): the run's timeline ({@link runViewOf} of its
 * fold, what the viewer's pages show) with what compaction archived read back, told in the timeline's words
 * (src/read/timeline.ts). `activity`, the run's (`runActivity`), keeps a run nobody runs from
 * reading as if its steps in flight still ran.
 *
 * @example
 * const story = await runStory(journal, "r-1", await readJournal(journal, "r-1"), "stalled");
 * story.turns[0]?.tools[0]?.status; // "started": cut off, not running
 */
export async function runStory(
  journal: OpenJournal,
  runId: string,
  entries: readonly JournalEntry[],
  activity?: RunActivity,
): Promise<RunStory> {
  const state = foldEntries(entries);
  for (const frame of Object.values(state.frames)) {
    if (frame.archived === undefined) continue;
    const archived = await readArchived(journal, frame.frameId, { runId, entries });
    if (archived) restoreArchived(state, archived);
  }
  const view = runViewOf(state);
  const pendingApprovals = await listPendingApprovals(journal, { runId });
  const runs = new Set((await journal.store.listRuns()).map((r) => r.runId));
  const turns: StoryTurn[] = [];
  for (const turn of turnsOf(view)) {
    const tools: StoryTool[] = [];
    for (const call of turn.calls) {
      const child = childRunId(runId, call.stepId);
      let subRun: StorySubRun | undefined;
      if (runs.has(child)) {
        const info = runInfo(child, await readJournal(journal, child));
        subRun = { runId: child, loopId: info.loopId, status: info.status, iterations: info.iterations };
      }
      const d = durationOf(call.startedAt, call.endedAt);
      tools.push({
        stepId: call.stepId,
        toolName: call.toolName,
        status: callStatus(call, view, activity),
        ...(call.settled ? { reason: call.settled } : {}),
        ...(d === undefined ? {} : { durationMs: d }),
        ...(call.bytes === undefined ? {} : { bytes: call.bytes }),
        ...(call.approval ? { approval: call.approval } : {}),
        ...(call.approval && "editedInput" in call.approval ? { input: call.input } : {}),
        ...(call.reruns ? { reruns: call.reruns } : {}),
        ...(subRun ? { subRun } : {}),
      });
    }
    const m = turn.model;
    const d = durationOf(m.startedAt, m.endedAt);
    turns.push({
      turn: turn.turn,
      stepId: turn.stepId,
      status: modelStatus(turn, view, activity),
      ...(d === undefined ? {} : { durationMs: d }),
      ...(m.content ? { text: m.content } : {}),
      ...(m.usage ? { usage: m.usage } : {}),
      ...(m.failures ? { failedAttempts: m.failures } : {}),
      tools,
    });
  }
  const started = entries.find((e) => e.type === "run.started");
  const forkedFrom = started?.type === "run.started" ? started.data.forkedFrom : undefined;
  const parent = runId.includes("/") ? await parentRunOf(journal, runId) : undefined;
  const ended = runEnd(view);
  return {
    runId,
    loopId: view.loopId,
    status: view.status,
    startedAt: entries[0]?.meta.at,
    updatedAt: entries.at(-1)?.meta.at,
    ...(forkedFrom ? { forkedFrom } : {}),
    ...(parent ? { parent } : {}),
    turns,
    tokens: { input: view.tokens.input, output: view.tokens.output },
    pendingApprovals,
    waits: waitsOf(view),
    ...(ended ? { ended } : {}),
  };
}

/**
 * Puts back in `state` what compaction moved out of the journal for one frame, for the story to
 * tell: its times (its first start, its completion) and its output (the model's text, usage and
 * tool names). Its status stays the one its `frames.archived` marker gave.
 */
function restoreArchived(state: RunState, { started, completed, attempts }: ArchivedFrame): void {
  const frame = state.frames[started.data.frameId];
  if (frame === undefined) return;
  frame.startedAt = attempts?.[0]?.meta.at ?? started.meta.at;
  frame.endedAt = completed.meta.at;
  if (!completed.data.failed && !("output" in frame)) frame.output = completed.data.output;
}

/** The ms between two journal times, when both are known. */
const durationOf = (from: string | undefined, to: string | undefined): number | undefined =>
  from && to ? Math.max(0, Date.parse(to) - Date.parse(from)) : undefined;

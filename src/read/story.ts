import {
  approvalId,
  childRunId,
  digestOf,
  type ErrorCause,
  type ForkedFromData,
  foldEntries,
  hydrateArchived,
  type JournalEntry,
  listPendingApprovals,
  type OpenJournal,
  type PendingApproval,
  parseFrameId,
  type RunStatus,
  readArchived,
  readJournal,
  responseAt,
  toolStepId,
} from "../index.ts";
import { parentRunOf } from "../runtime/subRuns.ts";
import { runInfo } from "./runInfo.ts";

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
  readonly ended?: StoryEnd;
}

export interface StoryTurn {
  readonly turn: number;
  readonly stepId: string;
  /** completed, failed, started (no answer recorded: running, or cut off) */
  readonly status: string;
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
  /** ok, error, started (outcome not recorded), waiting-for-approval, not-run, or the settled reason. */
  readonly status: string;
  readonly reason?: string;
  readonly durationMs?: number;
  readonly bytes?: number;
  readonly approval?: { readonly approved: boolean; readonly by?: string; readonly reason?: string };
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

export type StoryEnd =
  | { readonly type: "completed"; readonly content: string; readonly iterations: number }
  | { readonly type: "interrupted"; readonly reason: string; readonly detail: unknown; readonly cause?: ErrorCause }
  | { readonly type: "cancelled"; readonly reason: string }
  | { readonly type: "failed"; readonly error: { readonly name: string; readonly message: string } };

/** Reads a run's story (see {@link RunStory}). */
export async function runStory(
  journal: OpenJournal,
  runId: string,
  entries: readonly JournalEntry[],
): Promise<RunStory> {
  const state = await hydrateArchived(journal, foldEntries(entries), { only: "model" });
  const times = new Map<string, { started?: string; ended?: string }>();
  const note = (e: JournalEntry) => {
    if (e.type !== "frame.started" && e.type !== "frame.completed") return;
    const t = times.get(e.data.frameId) ?? {};
    if (e.type === "frame.started") t.started ??= e.meta.at;
    else t.ended = e.meta.at;
    times.set(e.data.frameId, t);
  };
  for (const e of entries) note(e);
  for (const frame of Object.values(state.frames)) {
    if (!frame.archived) continue;
    const archived = await readArchived(journal, frame.frameId, { runId, entries });
    for (const e of [...(archived?.attempts ?? []), ...(archived ? [archived.started, archived.completed] : [])])
      note(e);
  }
  const duration = (id: string) => {
    const t = times.get(id);
    return t?.started && t.ended ? Math.max(0, Date.parse(t.ended) - Date.parse(t.started)) : undefined;
  };
  const pendingApprovals = await listPendingApprovals(journal, { runId });
  const waiting = new Set(pendingApprovals.filter((p) => p.runId === runId).map((p) => p.stepId));
  const runs = new Set((await journal.store.listRuns()).map((r) => r.runId));
  const subRuns = new Map<string, StorySubRun>(); // by the call's step id
  for (const id of Object.keys(state.frames)) {
    const child = childRunId(runId, id);
    if (parseFrameId(id)?.kind !== "tool" || !runs.has(child)) continue;
    const info = runInfo(child, await readJournal(journal, child));
    subRuns.set(id, { runId: child, loopId: info.loopId, status: info.status, iterations: info.iterations });
  }
  const loopId = state.loopId ?? "?";
  let modelTurns = 0;
  for (const id of Object.keys(state.frames)) {
    const parsed = parseFrameId(id);
    if (parsed?.kind === "model") modelTurns = Math.max(modelTurns, parsed.turn + 1);
  }
  const tokens = { input: 0, output: 0 };
  const turns: StoryTurn[] = [];
  for (let turn = 0; turn < modelTurns; turn++) {
    const stepId = `${loopId}#turn:${turn}:model`;
    const frame = state.frames[stepId];
    const response = responseAt(state, turn);
    tokens.input += response?.usage?.inputTokens ?? 0;
    tokens.output += response?.usage?.outputTokens ?? 0;
    const tools = (response?.toolCalls ?? []).map((call, index): StoryTool => {
      const id = toolStepId(loopId, turn, index);
      const f = state.frames[id];
      const settled = state.settled[id];
      const choice = state.decisions[approvalId(id)]?.choice as
        | { approved?: boolean; by?: string; reason?: string }
        | undefined;
      const approval =
        choice === undefined
          ? undefined
          : {
              approved: choice.approved === true,
              ...(typeof choice.by === "string" ? { by: choice.by } : {}),
              ...(typeof choice.reason === "string" ? { reason: choice.reason } : {}),
            };
      const status = settled
        ? settled.status
        : f?.status === "completed"
          ? "ok"
          : f?.status === "failed"
            ? "error"
            : f?.status === "started"
              ? "started"
              : waiting.has(id)
                ? "waiting-for-approval"
                : "not-run";
      const bytes = settled
        ? digestOf(settled.result).bytes
        : (f?.recorded?.bytes ??
          f?.archived?.bytes ??
          (f?.status === "completed" ? digestOf(f.output).bytes : undefined));
      const d = duration(id);
      const subRun = subRuns.get(id);
      return {
        stepId: id,
        toolName: call.name,
        status,
        ...(settled ? { reason: settled.reason } : {}),
        ...(d === undefined ? {} : { durationMs: d }),
        ...(bytes === undefined ? {} : { bytes }),
        ...(approval ? { approval } : {}),
        ...(subRun ? { subRun } : {}),
      };
    });
    const d = duration(stepId);
    const failed = state.attempts[stepId]?.attempt;
    turns.push({
      turn,
      stepId,
      status: frame?.status ?? "not-run",
      ...(d === undefined ? {} : { durationMs: d }),
      ...(response?.content ? { text: response.content } : {}),
      ...(response?.usage ? { usage: response.usage } : {}),
      ...(failed ? { failedAttempts: failed } : {}),
      tools,
    });
  }
  const started = entries.find((e) => e.type === "run.started");
  const forkedFrom = started?.type === "run.started" ? started.data.forkedFrom : undefined;
  const parent = runId.includes("/") ? await parentRunOf(journal, runId) : undefined;
  return {
    runId,
    loopId: state.loopId,
    status: state.status,
    startedAt: entries[0]?.meta.at,
    updatedAt: entries.at(-1)?.meta.at,
    ...(forkedFrom ? { forkedFrom } : {}),
    ...(parent ? { parent } : {}),
    turns,
    tokens,
    pendingApprovals,
    ...(storyEnd(state) ?? {}),
  };
}

function storyEnd(state: ReturnType<typeof foldEntries>): { ended: StoryEnd } | undefined {
  switch (state.status) {
    case "completed":
      return state._output ? { ended: { type: "completed", ...state._output } } : undefined;
    case "interrupted": {
      const i = state.interruption;
      if (!i) return undefined;
      return {
        ended: { type: "interrupted", reason: i.reason, detail: i.detail, ...(i.cause ? { cause: i.cause } : {}) },
      };
    }
    case "cancelled":
      return { ended: { type: "cancelled", reason: state.cancelled?.reason ?? "" } };
    case "failed":
      return state.error ? { ended: { type: "failed", error: state.error } } : undefined;
    default:
      return undefined;
  }
}

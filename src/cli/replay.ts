import { setTimeout as sleep } from "node:timers/promises";
import {
  agentLoop$,
  approvalId,
  createJournal,
  isAgentInterruptedError,
  type LeanAgentStep,
  type ModelResponse,
  memoryStore,
  modelFrameId,
  outcomeId,
  parseFrameId,
  type RunRequest,
  type RunState,
  rebuildToolCallLog,
  recordedModePin,
  type Skill,
  type Tool,
} from "../index.ts";

/**
 * Replays a recorded run through the real statecharts, for an inspector to watch: a stand-in
 * loop whose model answers each turn with the recorded response, whose tools return the recorded
 * outputs (or throw the recorded failures and refusals), whose approvals are the recorded
 * decisions, run against a fresh in-memory journal. Where the recording stops (a crash, an abort,
 * a pending approval, a model error, the iteration limit) the replay stops the same way. Nothing
 * of the original run is executed again, and its journal is only read.
 */

export interface ReplayResult {
  /** How the replay ended: completed, or interrupted with a reason. */
  readonly ended: string;
  readonly turns: number;
  /** Lean entries of the replay whose status and digest equal the recorded run's, out of `of`. */
  readonly matching: number;
  readonly of: number;
}

const ABORT = Symbol("the recording ends here");

/**
 * @param state the run's folded state, archived frames hydrated (`hydrateArchived`)
 * @param recorded the run's lean log, to compare the replay with
 * @example
 * const result = await replayRun(state, lean, { inspect: inspector.inspect });
 */
export async function replayRun(
  state: RunState,
  recorded: readonly LeanAgentStep[],
  options: { readonly inspect: NonNullable<RunRequest["inspect"]>; readonly paceMs?: number },
): Promise<ReplayResult> {
  const loopId = state.loopId ?? "?";
  const runId = state.runId ?? "?";
  const responses = recordedResponses(state, loopId);
  const stop = new AbortController();
  const hold = async (signal: AbortSignal): Promise<never> => {
    stop.abort(ABORT);
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    throw new Error("the recording ends here");
  };
  const model = {
    async generate({ messages, signal }: { messages: readonly { role: string }[]; signal: AbortSignal }) {
      const turn = messages.filter((m) => m.role === "assistant").length;
      if (options.paceMs) await sleep(options.paceMs);
      const response = responses[turn];
      if (response) return response;
      const interruption = state.interruption;
      if (interruption?.reason === "model-error" && turn === responses.length) {
        throw new Error(String((interruption.detail as { message?: unknown } | null)?.message ?? "model error"));
      }
      return hold(signal);
    },
  };
  const approvals = approvalTools(state);
  // fromEntries defines own keys: recorded names (`__proto__` too) stay tools, never a prototype.
  // run.started names the loop's own tools; a tool source's (MCP) are known by the frames they left.
  const names = new Set(state.tools);
  for (const frame of Object.values(state.frames))
    if (frame.effect.startsWith("tool:")) names.add(frame.effect.slice(5));
  const tools: Record<string, Tool> = Object.fromEntries(
    [...names].map((name): [string, Tool] => [
      name,
      {
        description: `replays the outputs ${name} recorded`,
        ...(approvals.has(name) ? { requiresApproval: true } : {}),
        execute: (_input, { stepId, signal }) => recordedOutput(state, stepId, () => hold(signal)),
      },
    ]),
  );
  const limit = state.interruption?.reason === "max-iterations";
  const pin = recordedModePin(state);
  const loop = agentLoop$({
    id: loopId,
    model,
    tools,
    maxIterations: Math.max(1, limit || state.status === "completed" ? responses.length : responses.length + 1),
    ...(pin ? { toolCallLog: pin } : {}),
    ...skillsOf(state),
    approve: ({ stepId }) => {
      const choice = state.decisions[approvalId(stepId)]?.choice as { approved?: boolean } | undefined;
      return choice === undefined ? "pending" : choice.approved === true;
    },
  });
  const journal = createJournal({ store: memoryStore() });
  let ended = "completed";
  try {
    await loop.run({ runId, journal, input: state.input ?? "", signal: stop.signal, inspect: options.inspect });
  } catch (e) {
    if (!isAgentInterruptedError(e)) throw e;
    ended = `interrupted (${e.run.reason === "aborted" && stop.signal.reason === ABORT ? "the recording ends here" : e.run.reason})`;
  }
  const replayed = new Map((await rebuildToolCallLog(journal, runId, "lean")).map((e) => [e.stepId, e]));
  const matching = recorded.filter((e) => {
    const r = replayed.get(e.stepId);
    return r?.digest === e.digest && r.status === e.status;
  }).length;
  return { ended, turns: responses.length, matching, of: recorded.length };
}

/** The model's recorded responses, turn by turn, up to the first turn without one. */
function recordedResponses(state: RunState, loopId: string): ModelResponse[] {
  const out: ModelResponse[] = [];
  for (;;) {
    const frame = state.frames[modelFrameId(loopId, out.length)];
    if (frame?.status !== "completed" || !("output" in frame)) return out;
    out.push(frame.output as ModelResponse);
  }
}

/** What the step recorded: its output, its failure or refusal (thrown, as the model saw it), or nothing yet. */
function recordedOutput(state: RunState, stepId: string, nothing: () => Promise<never>): unknown {
  const frame = state.frames[stepId];
  if (frame?.status === "completed") return frame.output;
  const failed =
    frame?.status === "failed"
      ? (state.decisions[outcomeId(stepId)]?.choice as { failed?: unknown } | undefined)?.failed
      : state.settled[stepId]?.result;
  if (failed === undefined) return nothing();
  // The runtime records a thrown error as { error: name, message }: the shape failures and refusals have.
  const { error, message } = (failed ?? {}) as { error?: unknown; message?: unknown };
  throw Object.assign(new Error(String(message ?? JSON.stringify(failed))), { name: String(error ?? "Error") });
}

/**
 * The tools that ask for approval: those some call of which asked in the recording, by an
 * approval decision or by being pending when the run interrupted (`approval-pending` names its
 * steps). A tool that asks asks for every call, so no other tool does.
 */
function approvalTools(state: RunState): Set<string> {
  const asked = Object.keys(state.decisions)
    .filter((id) => id.endsWith(APPROVAL))
    .map((id) => id.slice(0, -APPROVAL.length));
  if (state.interruption?.reason === "approval-pending") {
    const { stepIds } = (state.interruption.detail ?? {}) as { stepIds?: unknown };
    if (Array.isArray(stepIds)) asked.push(...stepIds.filter((id): id is string => typeof id === "string"));
  }
  const tools = new Set<string>();
  for (const stepId of asked) {
    const name = calledTool(state, stepId);
    if (name !== undefined) tools.add(name);
  }
  return tools;
}

const APPROVAL = approvalId("");

/** The tool name of a tool step (`<loop>#turn:<i>:tool:<j>`), read from turn i's recorded response. */
function calledTool(state: RunState, stepId: string): string | undefined {
  const step = parseFrameId(stepId);
  if (step?.kind !== "tool") return undefined;
  const response = state.frames[modelFrameId(step.loopId, step.turn)]?.output as ModelResponse | undefined;
  return response?.toolCalls?.[step.index]?.name;
}

/** Skills the run activated, with the instructions it was fed (none: no `skills` option). */
function skillsOf(state: RunState): { skills?: Record<string, Skill> } {
  const skills = new Map<string, Skill>();
  for (const settled of Object.values(state.settled)) {
    const result = settled.result as { skill?: unknown; instructions?: unknown } | null;
    if (settled.reason === "skill-activation" && typeof result?.skill === "string") {
      skills.set(result.skill, { description: "a skill the run activated", instructions: String(result.instructions) });
    }
  }
  return skills.size > 0 ? { skills: Object.fromEntries(skills) } : {};
}

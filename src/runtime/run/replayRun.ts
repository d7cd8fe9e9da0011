import { digestOfRecorded } from "../../core/digest.ts";
import { errorGuard, LoomError } from "../../core/errors.ts";
import { checkRunId, modelFrameId, parseFrameId } from "../../events/ids.ts";
import { createJournal, readJournal } from "../../events/journal.ts";
import { memoryStore } from "../../events/memory.ts";
import type { Journal } from "../../events/spi.ts";
import type { JournalEntry, ModelResponse, NewEntry } from "../../events/types.ts";
import type { GenerateRequest, Model } from "../../models/types.ts";
import { type DiffOptions, diffRuns, type RunDiff } from "../../projections/runDiff.ts";
import { foldEntries, type RunState, responseAt } from "../../projections/runState.ts";
import type { AgentOutput, ToolCallLogMode } from "../../projections/types.ts";
import type { Tool, ToolContext } from "../base/config.ts";
import { hydrateArchived, resolveStep } from "../base/readers.ts";
import { runStartedData } from "../steps/actors.ts";
import { type AgentLoop, agentLoop$ } from "./agentLoop.ts";
import { readDiffSide } from "./readDiff.ts";

/** What a replayed tool call gets: its recorded output, its real execution, or neither. */
export type ReplayToolMode = "recorded" | "live" | "never";

/** A call of the replay the record cannot serve (no completed call of that tool with that input). */
export interface ReplayNewInput {
  readonly toolName: string;
  readonly input: unknown;
  /** The replay's step id of the call. */
  readonly stepId: string;
}

/** Options of {@link replayRun}. */
export interface ReplayOptions<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined> {
  /** The candidate: the changed loop (another prompt, model or tools) replayed on the recorded run's input. */
  readonly loop: AgentLoop<M>;
  /** Where the replay is journaled (never the recorded run's journal); default a new memory journal. */
  readonly into?: Journal;
  /** The replay's run id in `into`; default `<runId>.replay`. Tools' idempotency keys follow it, so they never meet the recorded run's. */
  readonly runId?: string;
  /**
   * Per tool name: `"recorded"` (the default) serves a call from the record when the recorded run
   * completed a call of that tool with the same input digest, without executing it; `"live"`
   * always executes; `"never"` never executes (a call the record cannot serve fails).
   */
  readonly tools?: Readonly<Record<string, ReplayToolMode>>;
  /**
   * What a call the record cannot serve gets: `"fail"` (the default: the replay stops with
   * `ReplayError` code `newInput`), `"live"` (the tool executes, unless it is `"never"` or has
   * `sideEffects` and is not named `"live"`), or a function whose value is the call's output.
   */
  readonly onNewInput?: "fail" | "live" | ((call: ReplayNewInput) => unknown);
  /**
   * `"live"` (the default): the candidate's model answers. `"recorded"`: each model call is
   * answered with the recorded response of its turn while its prompt digest is the recorded
   * one (the determinism check); the first call whose prompt differs stops the replay with
   * `ReplayError` code `promptChanged`.
   */
  readonly model?: "live" | "recorded";
  /** How the diff of the recorded run and the replay is judged (`diffRuns`' `match`). */
  readonly match?: DiffOptions["match"];
}

/** What a replay did. */
export interface ReplayResult<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined> {
  /** The replay's run id, in `journal`. */
  readonly runId: string;
  /** The journal the replay was written to (`options.into`, or the memory journal made for it). */
  readonly journal: Journal;
  /** The replay's value, when it completed. */
  readonly output?: AgentOutput<M>;
  /** Why the replay stopped before an answer (an interruption, a `ReplayError`), when it did. */
  readonly error?: unknown;
  /** Tool calls served from the record, model calls served from the record, tools executed. */
  readonly counts: { readonly servedTools: number; readonly servedModelCalls: number; readonly executedTools: number };
  /** The calls the record could not serve, in order. */
  readonly newInputs: readonly ReplayNewInput[];
  /** The recorded run beside the replay (`diffRuns`). */
  readonly diff: RunDiff;
}

/** Why a replay could not go on. */
export type ReplayErrorCode = "runNotFound" | "newInput" | "promptChanged" | "sameJournal" | "runExists";

/** A replay refused or stopped: which run, which step, and what to do. */
export class ReplayError extends LoomError {
  override readonly code: ReplayErrorCode;
  /** The step of the replay where it stopped, when one. */
  readonly stepId: string | undefined;

  constructor(code: ReplayErrorCode, message: string, stepId?: string) {
    super(code, message);
    this.code = code;
    this.stepId = stepId;
  }

  /** Not a model or tool failure to retry: the replay stops at once. */
  get isRetryable(): boolean {
    return false;
  }
}

/** True when `e` is a {@link ReplayError}. */
export const isReplayError = errorGuard(ReplayError, {
  codes: ["runNotFound", "newInput", "promptChanged", "sameJournal", "runExists"],
});

/**
 * Replays a recorded run against a changed agent: the candidate loop (`options.loop`) runs on the
 * recorded run's input, into another journal, and every tool call whose tool name and input
 * digest match a completed call of the recorded run is answered with that call's recorded output
 * without executing, so unchanged calls never run again and nothing touches the world. The
 * recorded run is only read. The replay's `run.started` says what it replays (`replayOf`: the
 * run, its last seq, both definition pins), and the result carries the structural diff of the two
 * runs' tool-call logs.
 *
 * @example
 * ```ts
 * const candidate = agentLoop$({ ...loop.config, system: "Be brief." });
 * const replay = await replayRun(journal, "order-42", { loop: candidate });
 * replay.counts.executedTools; // 0 when every call was served from the record
 * replay.diff.identical; // did the changed agent make the same calls?
 * ```
 */
export async function replayRun<M extends ToolCallLogMode | undefined>(
  journal: Journal,
  runId: string,
  options: ReplayOptions<M>,
): Promise<ReplayResult<M>> {
  checkRunId(runId, "replayRun");
  const into = options.into ?? createJournal({ store: memoryStore() });
  const replayId = options.runId ?? `${runId}.replay`;
  checkRunId(replayId, "replayRun");
  if (replayId === runId && (into === journal || into.store === journal.store)) {
    throw new ReplayError(
      "sameJournal",
      `replayRun(${runId}): the replay would write the recorded run; give another runId or another journal (into)`,
    );
  }
  const entries = await readJournal(journal, runId);
  if (entries.length === 0) {
    throw new ReplayError(
      "runNotFound",
      `replayRun: run ${runId} is not in this journal; check the run id (loom runs)`,
    );
  }
  if ((await into.store.read(replayId, { from: 1 })).length > 0) {
    throw new ReplayError(
      "runExists",
      `replayRun(${runId}): run ${replayId} is in the replay journal already; give another runId`,
    );
  }
  const state = await hydrateArchived(journal, foldEntries(entries)); // the entries read above, folded
  const recorded = await recordedCalls(journal, runId, state);
  const candidate = options.loop;
  const counts = { servedTools: 0, servedModelCalls: 0, executedTools: 0 };
  const newInputs: ReplayNewInput[] = [];
  const onNewInput = options.onNewInput ?? "fail";
  // A call the record cannot serve, under "fail", stops the whole replay (a tool's throw alone
  // would be fed to the model as the call's error, and the replay would go on).
  const stop = new AbortController();
  let stopped: ReplayError | undefined;

  const tools: Record<string, Tool> = {};
  for (const [name, tool] of Object.entries(candidate.config.tools ?? {})) {
    const mode = options.tools?.[name] ?? "recorded";
    const mayRun = mode === "live" || (mode === "recorded" && tool.sideEffects !== true);
    tools[name] = {
      ...tool,
      execute: async (input: unknown, context: ToolContext) => {
        if (mode === "live") {
          counts.executedTools++;
          return tool.execute(input, context);
        }
        const served = recorded
          .get(name)
          ?.get(digestOfRecorded(input).digest ?? "")
          ?.shift();
        if (served !== undefined) {
          counts.servedTools++;
          return served.output;
        }
        const call = { toolName: name, input, stepId: context.stepId };
        newInputs.push(call);
        if (typeof onNewInput === "function") return onNewInput(call);
        if (onNewInput === "live" && mayRun) {
          counts.executedTools++;
          return tool.execute(input, context);
        }
        stopped ??= new ReplayError(
          "newInput",
          `replay ${replayId} of ${runId}: ${name} was called at ${context.stepId} with an input the recorded run never gave it; ${
            mode === "never" || !mayRun
              ? `the tool may not run in a replay (${mode === "never" ? '"never"' : "sideEffects"}): name it "live" in tools to let it`
              : 'set onNewInput: "live" to execute it, or a function to answer it'
          }`,
          context.stepId,
        );
        stop.abort(stopped);
        throw stopped;
      },
    };
  }
  const halt = (error: ReplayError): ReplayError => {
    stopped ??= error;
    stop.abort(stopped);
    return stopped;
  };
  const model =
    options.model === "recorded" ? recordedModel(into, replayId, runId, state, counts, halt) : candidate.config.model;
  const loop = agentLoop$({ ...candidate.config, tools, model } as typeof candidate.config);

  // The replay's first entry says what it replays; the loop then runs it as a run that has started.
  const started: NewEntry = {
    type: "run.started",
    data: {
      ...runStartedData(loop.config, state.input ?? ""),
      replayOf: {
        runId,
        seq: entries.at(-1)?.seq ?? 0,
        recorded: state.definition?.digest ?? null,
        candidate: runStartedData(candidate.config, "").definition?.digest ?? "",
      },
    },
  };
  await into.store.append(replayId, [started], { expectedVersion: 0 });
  let output: AgentOutput<M> | undefined;
  let error: unknown;
  try {
    output = (await loop.run({ runId: replayId, journal: into, signal: stop.signal })) as AgentOutput<M>;
  } catch (e) {
    error = stopped ?? e;
  }
  const [a, b] = await Promise.all([readDiffSide(journal, runId), readDiffSide(into, replayId)]);
  return {
    runId: replayId,
    journal: into,
    ...(output ? { output } : {}),
    ...(error !== undefined ? { error } : {}),
    counts,
    newInputs,
    diff: diffRuns(a, b, options.match ? { match: options.match } : {}),
  };
}

/** The recorded run's completed tool calls: per tool name, per input digest, their outputs in order. */
async function recordedCalls(
  journal: Journal,
  runId: string,
  state: RunState,
): Promise<Map<string, Map<string, { output: unknown }[]>>> {
  const byTool = new Map<string, Map<string, { output: unknown }[]>>();
  const frames = Object.values(state.frames)
    .filter((f) => f.status === "completed" && parseFrameId(f.frameId)?.kind === "tool")
    .sort((x, y) => order(x.frameId) - order(y.frameId));
  for (const frame of frames) {
    const parsed = parseFrameId(frame.frameId);
    if (parsed?.kind !== "tool") continue;
    const call = responseAt(state, parsed.turn)?.toolCalls[parsed.index];
    if (call === undefined) continue;
    const output =
      frame.claimCheck !== undefined || frame.archived !== undefined || !("output" in frame)
        ? (await resolveStep(journal, frame.frameId, { runId })).output
        : frame.output;
    const byInput = byTool.get(call.name) ?? new Map<string, { output: unknown }[]>();
    const list = byInput.get(frame.inputDigest) ?? [];
    list.push({ output });
    byInput.set(frame.inputDigest, list);
    byTool.set(call.name, byInput);
  }
  return byTool;
}

/** A tool frame's place in the run: by turn, then by index. */
function order(frameId: string): number {
  const parsed = parseFrameId(frameId);
  return parsed?.kind === "tool" ? parsed.turn * 10_000 + parsed.index : 0;
}

/**
 * A model that answers each call with the recorded response of its turn, while the prompt digest
 * the replay journaled for the call is the recorded one.
 */
function recordedModel(
  into: Journal,
  replayId: string,
  runId: string,
  state: RunState,
  counts: { servedModelCalls: number },
  halt: (error: ReplayError) => ReplayError,
): Model {
  const recordedLoop = state.loopId ?? "";
  let next = 1; // the seq of the replay's next entry not yet read
  let started: JournalEntry | undefined; // the replay's latest model frame.started
  return {
    async generate(_request: GenerateRequest): Promise<ModelResponse> {
      // The call's frame was started just before the model is asked: its turn and prompt digest,
      // read from the entries appended since the last call (the journal is not read again whole).
      const appended = await readJournal(into, replayId, { from: next });
      next = (appended.at(-1)?.seq ?? next - 1) + 1;
      for (const e of appended) {
        if (e.type === "frame.started" && parseFrameId(e.data.frameId)?.kind === "model") started = e;
      }
      if (started?.type !== "frame.started")
        throw halt(new ReplayError("promptChanged", `replay ${replayId}: no model call was started`));
      const parsed = parseFrameId(started.data.frameId);
      const turn = parsed?.kind === "model" ? parsed.turn : -1;
      const frame = state.frames[modelFrameId(recordedLoop, turn)];
      if (frame?.status !== "completed" || frame.inputDigest !== started.data.inputDigest || !("output" in frame)) {
        throw halt(
          new ReplayError(
            "promptChanged",
            `replay ${replayId} of ${runId}: the model call of turn ${turn} was fed another prompt than the recorded run's (or the record has no answer for it); replay with model: "live" to let the candidate's model answer`,
            started.data.frameId,
          ),
        );
      }
      counts.servedModelCalls++;
      return frame.output as ModelResponse;
    },
  };
}

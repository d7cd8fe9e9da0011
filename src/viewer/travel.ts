import { Immer } from "immer";
import { decisionStepOf } from "../events/ids.ts";
import type { AgentStep, Journal, LeanAgentStep } from "../index.ts";
import { foldEntries, hydrateArchived, type JournalEntry, projectToolCallLog } from "../journal.ts";
import { runStateProjection } from "../projections/runState.ts";
import { toolCallResult } from "../projections/toolCallLog.ts";
import { evolveView } from "../read/evolveView.ts";
import { initialView, type RunView } from "../read/runView.ts";
import { resolveClaimCheck } from "../runtime/base/conversation.ts";

/**
 * Time travel: a run's view at every point of its journal. State `i` is the view after the first
 * `i` entries, made from state `i - 1` by immer's `produce`: it copies only the path the entry
 * changes (its call, its turn, one chunk of turns) and shares everything else with the state
 * before, so keeping a state per seq costs memory in proportion to the entries, not to their
 * number squared. States are frozen: nothing can change the past by accident.
 */

/** The immer instance of the viewer: states frozen, so a shared subtree is never written twice. */
const immer = new Immer({ autoFreeze: true });

/** A run's entries and its view after each prefix of them. */
export interface Travel {
  readonly runId: string;
  readonly entries: readonly JournalEntry[];
  /** `states[i]`: the view after `entries[0..i)`; `states[0]` is the empty run. */
  readonly states: readonly RunView[];
}

/**
 * Every state of a run, one per entry.
 *
 * @example
 * const travel = buildTravel("run-1", await readJournal(journal, "run-1"));
 * travel.states[5].chart; // "running.dispatching": where the run was after its fifth entry
 */
export function buildTravel(runId: string, entries: readonly JournalEntry[]): Travel {
  const states: RunView[] = [immer.produce(initialView(), () => {})];
  return extendTravel({ runId, entries: [], states }, entries);
}

/** `travel` with `more` entries (appended after its last) folded on: the earlier states are shared, not rebuilt. */
export function extendTravel(travel: Travel, more: readonly JournalEntry[]): Travel {
  if (more.length === 0) return travel;
  const states = [...travel.states];
  let state = states[states.length - 1] as RunView;
  for (const entry of more) {
    state = immer.produce(state, (draft) => {
      evolveView(draft, entry);
    });
    states.push(state);
  }
  return { runId: travel.runId, entries: [...travel.entries, ...more], states };
}

/** Both shapes of the tool-call log as the fold and the projection rebuild them after `entries[0..index)`. */
export interface LogsAt {
  readonly full: AgentStep[];
  readonly lean: LeanAgentStep[];
  /**
   * The outputs the full log holds as claim-check envelopes, read back from the blob store (what
   * the model was fed), by step id; a string when the blob cannot be read (it says why).
   */
  readonly claimChecked: ReadonlyMap<string, { readonly output: unknown } | { readonly problem: string }>;
}

/**
 * The full and the lean tool-call log at point `index` of the run: the real fold
 * (`foldEntries`) of the entries up to there, its archived frames read back, projected by
 * `projectToolCallLog` in each shape: exactly what a reader of the journal cut there would get;
 * and the claim-checked outputs of the frames completed by then, read back (verified) from the
 * journal's blob store, so the page can show what the model was fed.
 *
 * @example
 * const { full, lean } = await logsAt(journal, travel, 40);
 */
export async function logsAt(journal: Journal, travel: Travel, index: number): Promise<LogsAt> {
  const state = foldEntries(travel.entries.slice(0, index));
  await hydrateArchived(journal, state);
  const claimChecked = new Map<string, { output: unknown } | { problem: string }>();
  for (const frame of Object.values(state.frames)) {
    if (frame.claimCheck === undefined) continue;
    const where = `run ${travel.runId} step ${frame.frameId}`;
    try {
      claimChecked.set(frame.frameId, { output: await resolveClaimCheck(frame.claimCheck, journal.blobs, where) });
    } catch (e) {
      claimChecked.set(frame.frameId, { problem: e instanceof Error ? e.message : String(e) });
    }
  }
  return { full: projectToolCallLog(state, "full"), lean: projectToolCallLog(state, "lean"), claimChecked };
}

/**
 * A run's tool-call logs for every point of its time travel, read once: both logs at its last
 * point ({@link logsAt}) and the point at which each call entered them. A slider move then filters
 * (`logsFrom`) instead of folding the run up to the point, reading its archive and blobs again.
 */
export interface TravelLog {
  /** Both logs at the last point. */
  readonly last: LogsAt;
  /** For each call of the logs (by step id), the first point whose logs hold it. */
  readonly from: ReadonlyMap<string, number>;
}

/**
 * Reads `travel`'s logs once (see {@link TravelLog}).
 *
 * @example
 * const log = await buildTravelLog(journal, travel);
 * logsFrom(log, 40); // what logsAt(journal, travel, 40) reads
 */
export async function buildTravelLog(journal: Journal, travel: Travel): Promise<TravelLog> {
  const last = await logsAt(journal, travel, travel.entries.length);
  const from = new Map<string, number>();
  let state = runStateProjection.initial();
  travel.entries.forEach((entry, i) => {
    state = runStateProjection.evolve(state, entry);
    for (const stepId of mayEnd(entry)) {
      if (!from.has(stepId) && toolCallResult(state, stepId) !== undefined) from.set(stepId, i + 1);
    }
  });
  return { last, from };
}

/** The tool calls an entry may end: its frame completed, its outcome decided, settled, or archived. */
function mayEnd(entry: JournalEntry): readonly string[] {
  switch (entry.type) {
    case "frame.completed":
      return [entry.data.frameId];
    case "call.settled":
      return [entry.data.stepId];
    case "decision.recorded": {
      const stepId = decisionStepOf(entry.data.decisionId, "outcome");
      return stepId === undefined ? [] : [stepId];
    }
    case "frames.archived":
      return entry.data.frameIds;
    default:
      return [];
  }
}

/** Both logs at point `index`, from the logs read once: the calls that had entered them by then. */
export function logsFrom(log: TravelLog, index: number): LogsAt {
  const { last, from } = log;
  const keep = last.lean.map((s) => (from.get(s.stepId) ?? Number.POSITIVE_INFINITY) <= index);
  const claimChecked = new Map<string, { readonly output: unknown } | { readonly problem: string }>();
  for (const [stepId, blob] of last.claimChecked) {
    if ((from.get(stepId) ?? Number.POSITIVE_INFINITY) <= index) claimChecked.set(stepId, blob);
  }
  return {
    full: last.full.filter((_, i) => keep[i]),
    lean: last.lean.filter((_, i) => keep[i]),
    claimChecked,
  };
}

import { Immer } from "immer";
import { decisionStepOf } from "../events/ids.ts";
import type { AgentStep, Journal, LeanAgentStep } from "../index.ts";
import { foldEntries, hydrateArchived, type JournalEntry, projectToolCallLog, type RunState } from "../journal.ts";
import { runStateProjection } from "../projections/runState.ts";
import { toolCallResult } from "../projections/toolCallLog.ts";
import { type RunView, runViewOf } from "../read/runView.ts";
import { resolveClaimCheck } from "../runtime/base/conversation.ts";

/**
 * Time travel: a run's state at every point of its journal, the same fold a resume trusts
 * (`runStateProjection`), evolved entry by entry under immer's `produce`. A state copies only what
 * its entries change (a frame, the frame table) and shares every frame it does not touch with the
 * state it was made from; states are frozen, so nothing can change the past by accident. The
 * travel keeps one state every {@link EVERY} entries (`every`) and makes the state of a point between two
 * from the one before it: keeping a state per entry would copy the frame table once per entry.
 */

/** The immer instance of time travel: states frozen, so a shared frame is never written twice. */
const immer = new Immer({ autoFreeze: true });

/** Entries between two states a travel keeps, unless told otherwise. */
export const EVERY = 32;

/** A run's entries and its state every `every` entries. */
export interface Travel {
  readonly runId: string;
  readonly entries: readonly JournalEntry[];
  /** Entries between two states kept. */
  readonly every: number;
  /** `kept[k]`: the state after `entries[0..k * every)`; `kept[0]` is the empty run. */
  readonly kept: readonly RunState[];
}

/**
 * A run's time travel: its states, kept every `every` entries ({@link stateAt} reads any point).
 *
 * @example
 * const travel = buildTravel("run-1", await readJournal(journal, "run-1"));
 * viewAt(travel, 5).chart; // "running.dispatching": where the run was after its fifth entry
 */
export function buildTravel(runId: string, entries: readonly JournalEntry[], every = EVERY): Travel {
  const kept: RunState[] = [immer.produce(runStateProjection.initial(), () => {})];
  return extendTravel({ runId, entries: [], every, kept }, entries);
}

/** `travel` with `more` entries (appended after its last) folded on: the states kept are shared, not rebuilt. */
export function extendTravel(travel: Travel, more: readonly JournalEntry[]): Travel {
  if (more.length === 0) return travel;
  const entries = [...travel.entries, ...more];
  const { every } = travel;
  const kept = [...travel.kept];
  while (kept.length * every <= entries.length) {
    const from = (kept.length - 1) * every;
    kept.push(evolved(kept[kept.length - 1] as RunState, entries.slice(from, from + every)));
  }
  return { runId: travel.runId, entries, every, kept };
}

/**
 * The run's state after `entries[0..index)`: equal to `foldEntries` of those entries, made from
 * the state kept before it, with which it shares every frame its entries do not touch (frozen).
 *
 * @example
 * stateAt(travel, 40).status; // "running"
 */
export function stateAt(travel: Travel, index: number): RunState {
  const k = Math.min(Math.floor(index / travel.every), travel.kept.length - 1);
  const base = travel.kept[k] as RunState;
  return evolved(base, travel.entries.slice(k * travel.every, index));
}

/**
 * The run's view after `entries[0..index)` (`runViewOf` of {@link stateAt}): what the time-travel
 * page shows at that point.
 *
 * @example
 * viewAt(travel, 0).chart; // "starting"
 */
export function viewAt(travel: Travel, index: number): RunView {
  const last = lastView.get(travel);
  if (last?.index === index) return last.view;
  const view = runViewOf(stateAt(travel, index));
  lastView.set(travel, { index, view });
  return view;
}

/** The view of the point asked for last, by travel: a page asks it for its part and for its chart. */
const lastView = new WeakMap<Travel, { readonly index: number; readonly view: RunView }>();

/** `state` with `entries` folded on, by one `produce`: what they change is copied, the rest shared. */
function evolved(state: RunState, entries: readonly JournalEntry[]): RunState {
  if (entries.length === 0) return state;
  return immer.produce(state, (draft) => {
    for (const entry of entries) runStateProjection.evolve(draft, entry);
  });
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

import { modelFrameId, outcomeId, toolStepId } from "../events/ids.ts";
import type { ModelResponse } from "../events/types.ts";
import type { RunState } from "../projections/runState.ts";

/**
 * The states of `agentLoopMachine` a journal can show a run in: where a run rests between two
 * entries. The chart passes through `interrupting`, `cancelling` and `failing` while it journals
 * the entry that ends the run, and stops in `lost` without journaling anything, so no journal
 * shows a run in those.
 */
export const JOURNAL_CHART_STATES = [
  "starting",
  "running.deciding",
  "running.callingModel",
  "running.backingOff",
  "running.dispatching",
  "finishing",
  "completed",
  "interrupted",
  "failed",
  "cancelled",
] as const;

/** A state of `agentLoopMachine` a journal can show a run in (see {@link JOURNAL_CHART_STATES}). */
export type JournalChartState = (typeof JOURNAL_CHART_STATES)[number];

/**
 * The `agentLoopMachine` state a run with this folded state is in, read from its journal the way a
 * resume would find it: `starting` before the first entry, the run's status once it ended, and
 * while it runs the step its last turn is at (calling the model, backing off after a failed
 * attempt, dispatching its calls, deciding on the next turn, finishing with an answer).
 *
 * @example
 * chartStateOf(foldEntries(entries)); // "running.dispatching": the last response's calls have not all ended
 */
export function chartStateOf(state: RunState): JournalChartState {
  if (state.status === "new") return "starting";
  if (state.status !== "running") return state.status;
  const { loopId } = state;
  if (loopId === undefined) return "running.deciding";
  // The last turn: one whose model call started and has no response yet, or the last answered one.
  const open = state.frames[modelFrameId(loopId, state.turns)];
  const turn = open !== undefined ? state.turns : state.turns - 1;
  if (turn < 0) return "running.deciding";
  const model = state.frames[modelFrameId(loopId, turn)];
  if (model?.status !== "completed") {
    const attempts = model && state.attempts[model.frameId];
    return attempts?.waiting === true && attempts.retryAt !== null ? "running.backingOff" : "running.callingModel";
  }
  const calls = callsOf(state, loopId, turn);
  if (calls === 0) return "finishing";
  for (let index = 0; index < calls; index++) {
    if (!ended(state, toolStepId(loopId, turn, index))) return "running.dispatching";
  }
  return "running.deciding";
}

/** How many calls turn `turn` asked for: its response's, or the archived calls' when the response was archived unread. */
function callsOf(state: RunState, loopId: string, turn: number): number {
  const model = state.frames[modelFrameId(loopId, turn)];
  if (model && "output" in model) {
    const calls = (model.output as Partial<ModelResponse> | undefined)?.toolCalls;
    return Array.isArray(calls) ? calls.length : 0;
  }
  let count = 0;
  while (state.frames[toolStepId(loopId, turn, count)]?.archived !== undefined) count++;
  return count;
}

/** A call has ended once its frame has an outcome, it was settled without running, or its failure was decided. */
function ended(state: RunState, stepId: string): boolean {
  const frame = state.frames[stepId];
  return (
    frame?.status === "completed" ||
    frame?.status === "failed" ||
    state.settled[stepId] !== undefined ||
    state.decisions[outcomeId(stepId)] !== undefined
  );
}

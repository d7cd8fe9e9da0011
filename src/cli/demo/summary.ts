import { type AgentOutput, type Journal, type LeanAgentStep, readJournal, rebuildToolCallLog } from "../../index.ts";
import { foldEntries } from "../../journal.ts";
import { entryBytes, modelCalls } from "../db.ts";

/** The figures the demo ends with, for one run. */
export interface RunFigures {
  readonly status: string;
  /** Model calls (the loop's `iterations`). */
  readonly iterations: number;
  readonly toolCalls: number;
  /** Entries in the journal, and their bytes as stored (type, data and meta JSON, UTF-8). */
  readonly entries: number;
  readonly journalBytes: number;
  /**
   * JSON bytes of the run's folded state (what a resume reads: `foldRun`) with the loop's value
   * (`_output`) holding the tool-call log, as a state that keeps its value holds it: `lean` with
   * the lean log, `full` with the full log (every tool output repeated) in its place.
   */
  readonly foldedState: { readonly full: number; readonly lean: number };
  /** JSON bytes of the loop's value alone, `{ content, toolCallLog, iterations }`, in each shape. */
  readonly output: { readonly full: number; readonly lean: number };
  /** The lean log as rebuilt from the journal. */
  readonly lean: LeanAgentStep[];
  /** The log the loop returned (`returned`) equals the one rebuilt from its journal. */
  readonly logIntact: boolean;
}

const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? "");

/**
 * Measures a lean run from its journal. Both folded-state figures come from the same fold, so
 * they differ only by the log's shape.
 *
 * @example
 * const { foldedState } = await measureRun(journal, runId); // { full: 1_230_000, lean: 700_000 }
 */
export async function measureRun(journal: Journal, runId: string, returned?: AgentOutput): Promise<RunFigures> {
  const entries = await readJournal(journal, runId);
  const state = foldEntries(entries);
  const recorded = state._output;
  const lean = await rebuildToolCallLog(journal, runId, "lean");
  const full = await rebuildToolCallLog(journal, runId, "full");
  const value = (log: unknown[]) => ({ ...(recorded ?? { content: "", iterations: 0 }), toolCallLog: log });
  return {
    status: state.status,
    iterations: recorded?.iterations ?? modelCalls(state),
    toolCalls: lean.length,
    entries: entries.length,
    journalBytes: entries.reduce((sum, e) => sum + entryBytes(e), 0),
    foldedState: {
      full: jsonBytes({ ...state, _output: value(full) }),
      lean: jsonBytes({ ...state, _output: value(lean) }),
    },
    output: { full: jsonBytes(value(full)), lean: jsonBytes(value(lean)) },
    lean,
    logIntact: returned !== undefined && JSON.stringify(returned.toolCallLog) === JSON.stringify(lean),
  };
}

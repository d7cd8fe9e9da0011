import type { JournalEntry } from "../journal.ts";
import { parseFrameId } from "../journal.ts";

/** A sub-agent run's place under its parent: the parent run and the call (its step) that runs it. */
export interface RunParent {
  readonly runId: string;
  readonly stepId: string;
}

/**
 * The tool calls each run started (its `frame.started` step ids): what makes `<runId>/<stepId>` a
 * sub-agent's run of it.
 */
export function startedCalls(entries: readonly JournalEntry[]): Set<string> {
  const calls = new Set<string>();
  for (const e of entries) if (e.type === "frame.started" && e.data.effect !== "model") calls.add(e.data.frameId);
  return calls;
}

/**
 * The parent of `runId` among the runs read (an `agentTool` child run is `<parent>/<stepId>`, the
 * step a tool call the parent started), or undefined for a top-level run.
 */
export function parentAmong(runId: string, calls: ReadonlyMap<string, ReadonlySet<string>>): RunParent | undefined {
  for (let i = runId.lastIndexOf("/"); i > 0; i = runId.lastIndexOf("/", i - 1)) {
    const stepId = runId.slice(i + 1);
    if (parseFrameId(stepId)?.kind !== "tool") continue;
    const parent = runId.slice(0, i);
    if (calls.get(parent)?.has(stepId)) return { runId: parent, stepId };
  }
  return undefined;
}

/**
 * Runs in tree order: top-level runs in the order given, each followed by its sub-agents' runs
 * (in the order given), theirs below them; `depth` 0 for a top-level run.
 */
export function inTreeOrder<T extends { readonly runId: string }>(
  runs: readonly T[],
  parentOf: (runId: string) => RunParent | undefined,
): { readonly run: T; readonly depth: number }[] {
  const children = new Map<string, T[]>();
  const roots: T[] = [];
  for (const run of runs) {
    const parent = parentOf(run.runId);
    if (parent === undefined) roots.push(run);
    else children.set(parent.runId, [...(children.get(parent.runId) ?? []), run]);
  }
  const out: { run: T; depth: number }[] = [];
  const visit = (run: T, depth: number) => {
    out.push({ run, depth });
    for (const child of children.get(run.runId) ?? []) visit(child, depth + 1);
  };
  for (const root of roots) visit(root, 0);
  return out;
}

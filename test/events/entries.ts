import type { CompletedRunValue, NewEntry } from "../../src/events/types.ts";

/** Builders for journal entries, so tests read as the facts they append. */

export const runStarted = (loopId = "demo", tools: string[] = ["search"]): NewEntry => ({
  type: "run.started",
  data: { loopId, input: "find the answer", tools },
});

export const frameStarted = (frameId: string, effect = "tool:search"): NewEntry => ({
  type: "frame.started",
  data: { frameId, effect, inputDigest: "0".repeat(64) },
});

export const frameCompleted = (frameId: string, output: unknown): NewEntry => ({
  type: "frame.completed",
  data: { frameId, output },
});

export const frameFailed = (frameId: string): NewEntry => ({
  type: "frame.completed",
  data: { frameId, failed: true },
});

export const decision = (decisionId: string, choice: unknown): NewEntry => ({
  type: "decision.recorded",
  data: { decisionId, source: "test", choice },
});

export const runCompleted = (output: CompletedRunValue = { content: "done", iterations: 1 }): NewEntry => ({
  type: "run.completed",
  data: { output },
});

/**
 * A whole turn `i` of loop `loop`: the model frame asking for `tools` calls, then each tool
 * frame started and completed with `output(j)`.
 */
export function turn(
  loop: string,
  i: number,
  tools: number,
  output: (j: number) => unknown = (j) => ({ j, i }),
): NewEntry[] {
  const model = `${loop}#turn:${i}:model`;
  const calls = Array.from({ length: tools }, (_, j) => ({
    id: `c${i}.${j}`,
    name: "search",
    input: { q: `${i}.${j}` },
  }));
  const out: NewEntry[] = [frameStarted(model, "model"), frameCompleted(model, { toolCalls: calls })];
  for (let j = 0; j < tools; j++) {
    const id = `${loop}#turn:${i}:tool:${j}`;
    out.push(frameStarted(id), frameCompleted(id, output(j)));
  }
  return out;
}

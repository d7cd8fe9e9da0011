import type { SettledReason } from "../events/types.ts";
import { isLeanAgentStep } from "./toolCallLog.ts";
import type { AgentOutput, AgentStep, LeanAgentStep } from "./types.ts";

/**
 * Readers of the loop's output, in either log shape: what downstream code (a conversation view, an
 * evals subject) reads from the tool-call log, in both shapes. A reader that needs a tool's
 * output itself must resolve the lean entry's `stepId` (`resolveStep`) or stay on "full".
 */

/**
 * The conversation reader: the names of the tools called at each iteration (index = iteration).
 * Reads tool names only, so it works on both shapes. `iterations` (the output's count) pads the
 * iterations that called no tool.
 *
 * @example
 * toolNamesByIteration(output.toolCallLog, output.iterations); // [["search", "fetch"], ["search"], []]
 */
export function toolNamesByIteration(log: readonly (AgentStep | LeanAgentStep)[], iterations = 0): string[][] {
  const last = log.reduce((n, step) => Math.max(n, step.iteration + 1), iterations);
  const names: string[][] = Array.from({ length: last }, () => []);
  for (const step of log) names[step.iteration]?.push(step.toolName);
  return names;
}

/** The refusal codes the loop feeds as `{ error: <reason>, message }` for a call it did not run. */
const REFUSALS: ReadonlySet<unknown> = new Set<SettledReason>([
  "unknown-tool",
  "input-too-large",
  "invalid-input",
  "approval-declined",
  "too-many-calls",
]);

/**
 * The evals output heuristic for a full entry: does `toolOutput` look like an error? An object
 * with `isError: true`, a thrown-error shape (`name` ending in "Error" and a string `message`),
 * or a truthy `error` field (the failure the loop feeds for a tool that threw is
 * `{ error: e.name, message }`). A refusal the loop fed (`{ error: "approval-declined" | "unknown-tool"
 * | "input-too-large" | "invalid-input", message }`) is NOT counted: the heuristic judges what a
 * tool returned, and a refused call returned nothing. Hence a declined approval is an error in
 * lean mode (its `status`) only.
 *
 * @example
 * looksLikeError({ error: "TypeError", message: "x is undefined" }); // true
 * looksLikeError({ error: "approval-declined", message: "declined" }); // false
 */
export function looksLikeError(output: unknown): boolean {
  if (typeof output !== "object" || output === null || Array.isArray(output)) return false;
  const o = output as {
    readonly isError?: unknown;
    readonly error?: unknown;
    readonly name?: unknown;
    readonly message?: unknown;
  };
  if (o.isError === true) return true;
  if (typeof o.name === "string" && o.name.endsWith("Error") && typeof o.message === "string") return true;
  return Boolean(o.error) && !REFUSALS.has(o.error);
}

/** One tool call as an eval sees it. */
export interface EvalToolCall {
  readonly iteration: number;
  readonly toolName: string;
  readonly toolInput: unknown;
  /** Lean: the entry's status. Full: {@link looksLikeError} of the output. */
  readonly isError: boolean;
  /** The output (full shape only). */
  readonly output?: unknown;
  /** The step id that resolves the output (lean shape only). */
  readonly stepId?: string;
}

/** The `agentLoop` subject an eval scores. */
export interface AgentLoopEvalSubject {
  readonly content: string;
  readonly iterations: number;
  readonly toolCalls: readonly EvalToolCall[];
  /** How many tool calls count as errors. */
  readonly toolErrors: number;
}

/**
 * The evals `agentLoop` subject of a run's output: status on a lean entry, the output heuristic
 * ({@link looksLikeError}) on a full one.
 *
 * @example
 * const subject = agentLoopEvalSubject(await loop.run({ runId, journal, input }));
 * subject.toolErrors; // 1
 */
export function agentLoopEvalSubject(output: AgentOutput): AgentLoopEvalSubject {
  const toolCalls = (output.toolCallLog as readonly (AgentStep | LeanAgentStep)[]).map((step): EvalToolCall => {
    const { iteration, toolName, toolInput } = step;
    if (isLeanAgentStep(step)) {
      return { iteration, toolName, toolInput, isError: step.status === "error", stepId: step.stepId };
    }
    return { iteration, toolName, toolInput, isError: looksLikeError(step.toolOutput), output: step.toolOutput };
  });
  return {
    content: output.content,
    iterations: output.iterations,
    toolCalls,
    toolErrors: toolCalls.filter((c) => c.isError).length,
  };
}

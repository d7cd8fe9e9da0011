import { LoomError } from "../core/errors.ts";
import type { ErrorCause } from "../events/types.ts";
import type { InterruptedAgentRun } from "../projections/types.ts";

/**
 * The run stopped before its answer (aborted, iteration limit, approval pending, model error) and
 * `run.interrupted` is journaled. Call `loop.run({ runId })` again to go on from where it stopped.
 * For a `model-error`, `cause` (also `run.cause`) is the model's error as the journal recorded it:
 * `{ name, message, status?, retryable? }`, the same after a restart.
 *
 * @example
 * try {
 *   await loop.run({ runId, journal, input });
 * } catch (e) {
 *   if (isAgentInterruptedError(e) && e.cause?.status === 401) console.error("check the API key");
 * }
 */
export class AgentInterruptedError extends LoomError {
  readonly run: InterruptedAgentRun;
  declare readonly cause: ErrorCause | undefined;
  constructor(run: InterruptedAgentRun) {
    const what =
      run.reason === "approval-pending"
        ? `waiting for approval of ${run.pendingApprovals.map((p) => p.stepId).join(", ")}; resume with loop.run({ runId: "${run.runId}", approvals: { [stepId]: true | false } })`
        : run.reason === "max-iterations"
          ? `the iteration limit was reached after ${run.iterations} model calls; raise maxIterations and call loop.run({ runId: "${run.runId}" }) to go on`
          : run.cause !== undefined
            ? `the model call failed: ${describeCause(run.cause)}; fix what it says and call loop.run({ runId: "${run.runId}" }) to call the model again`
            : `call loop.run({ runId: "${run.runId}" }) to resume from where it stopped`;
    super("agentInterrupted", `run ${run.runId} interrupted (${run.reason}): ${what}`, { cause: run.cause });
    this.run = run;
  }
}

export const isAgentInterruptedError = (e: unknown): e is AgentInterruptedError => e instanceof AgentInterruptedError;

/** The longest message a cause keeps: an error message, not a response body. */
const MAX_CAUSE_MESSAGE = 2_000;

/**
 * What the journal keeps of an error a model (or any effect) threw: its `name`, `message`, the
 * HTTP status when it has one (AI SDK `APICallError.statusCode`, or `status` as fetch-like and
 * provider SDK errors have it) and whether it says a retry may help (`isRetryable`). Never
 * throws, whatever was thrown (a string, an object whose getters throw).
 *
 * @example
 * errorCause(new APICallError({ message: "Unauthorized", statusCode: 401, isRetryable: false, ... }));
 * // { name: "AI_APICallError", message: "Unauthorized", status: 401, retryable: false }
 */
export function errorCause(error: unknown): ErrorCause {
  if (typeof error !== "object" || error === null) return { name: "Error", message: clipped(safeString(error)) };
  const e = error as Record<string, unknown>;
  const name = read(e, "name");
  const message = read(e, "message");
  const inner = read(e, "cause");
  // "fetch failed" says little: the network error under it (ECONNREFUSED…) says what happened.
  const innerMessage =
    typeof inner === "object" && inner !== null ? read(inner as Record<string, unknown>, "message") : undefined;
  const text = typeof message === "string" ? message : safeString(error);
  const cause: { name: string; message: string; status?: number; retryable?: boolean } = {
    name: typeof name === "string" && name !== "" ? name : "Error",
    message: clipped(typeof innerMessage === "string" && innerMessage !== "" ? `${text}: ${innerMessage}` : text),
  };
  const status = [read(e, "statusCode"), read(e, "status")].find(
    (s): s is number => Number.isInteger(s) && (s as number) >= 100 && (s as number) <= 599,
  );
  if (status !== undefined) cause.status = status;
  const retryable = read(e, "isRetryable");
  if (typeof retryable === "boolean") cause.retryable = retryable;
  return cause;
}

/**
 * A cause on one line, for messages and the CLI.
 *
 * @example
 * describeCause({ name: "AI_APICallError", message: "Unauthorized", status: 401, retryable: false });
 * // "AI_APICallError (status 401, not retryable): Unauthorized"
 */
export function describeCause(cause: ErrorCause): string {
  const facts = [
    ...(cause.status === undefined ? [] : [`status ${cause.status}`]),
    ...(cause.retryable === undefined ? [] : [cause.retryable ? "retryable" : "not retryable"]),
  ];
  return `${cause.name}${facts.length > 0 ? ` (${facts.join(", ")})` : ""}: ${cause.message.replace(/\s+/g, " ")}`;
}

function read(o: Record<string, unknown>, key: string): unknown {
  try {
    return o[key];
  } catch {
    return undefined; // a getter that throws tells nothing
  }
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

const clipped = (s: string) => (s.length > MAX_CAUSE_MESSAGE ? `${s.slice(0, MAX_CAUSE_MESSAGE - 1)}…` : s);

/**
 * What the journal keeps of a thrown error (`ErrorCause`), read from anything thrown. Journal
 * grammar: `run.interrupted` records it, and the failure policy (src/policies/retry.ts) reads it.
 */
import type { ErrorCause } from "./types.ts";

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

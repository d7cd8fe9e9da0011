/**
 * The failure policy as pure decisions: what an error says about itself, and whether
 * and when a failed attempt is tried again. No clock, no randomness, no I/O here: the caller
 * passes `now` and a `random` draw, and journals the decision (its `retryAt`), so a resumed run
 * serves the decision instead of drawing again.
 */
import { errorCause } from "../events/errorCause.ts";
import type { AttemptError } from "../events/types.ts";

export type { AttemptError } from "../events/types.ts";

/**
 * How a failing call is tried again: up to `maxAttempts` attempts in all, waiting
 * `initialDelayMs × factor^(n−1)` (at most `maxDelayMs`) after the n-th failure, less a random
 * share of up to `jitter` of it, and never less than a server's `Retry-After`.
 */
export interface RetryPolicy {
  /** Attempts in all, the first included (1: never retried). */
  readonly maxAttempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  /** Growth of the delay per failed attempt (2: doubles). */
  readonly factor: number;
  /** Share of each delay drawn at random, 0 to 1 (0.2: the delay is 80–100% of its nominal value). */
  readonly jitter: number;
  /** Decides which errors are retried; by default `error.retryable`. */
  readonly retryable?: (error: AttemptError) => boolean;
}

/** Models: three attempts, 0.5 s then 1 s, retrying only what says it may succeed later. */
export const DEFAULT_MODEL_RETRY: RetryPolicy = Object.freeze({
  maxAttempts: 3,
  initialDelayMs: 500,
  maxDelayMs: 30_000,
  factor: 2,
  jitter: 0.2,
});

/** Tools: one attempt. A tool is retried only when its policy says so: it may not be idempotent. */
export const DEFAULT_TOOL_RETRY: RetryPolicy = Object.freeze({
  maxAttempts: 1,
  initialDelayMs: 500,
  maxDelayMs: 30_000,
  factor: 2,
  jitter: 0.2,
});

/** What to do after a failed attempt. */
export type RetryDecision =
  | { readonly retry: true; readonly delayMs: number; readonly retryAt: number }
  | { readonly retry: false; readonly why: "not-retryable" | "attempts-exhausted" };

/**
 * Decides whether attempt `attempt` (1-based, the one that just failed at `now`) is followed by
 * another, and when. `random` is a draw in [0, 1) that the caller makes and the journal keeps.
 *
 * @example
 * decideRetry(DEFAULT_MODEL_RETRY, { attempt: 1, error, now: Date.now(), random: Math.random() });
 * // { retry: true, delayMs: 463, retryAt: 1764752000463 } for a 503; { retry: false, … } for a 401
 */
export function decideRetry(
  policy: RetryPolicy,
  request: { readonly attempt: number; readonly error: AttemptError; readonly now: number; readonly random: number },
): RetryDecision {
  const { attempt, error, now, random } = request;
  const retryable = policy.retryable ? policy.retryable(error) : error.retryable;
  if (!retryable) return { retry: false, why: "not-retryable" };
  if (attempt >= policy.maxAttempts) return { retry: false, why: "attempts-exhausted" };
  const nominal = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.factor ** (attempt - 1));
  const jittered = nominal * (1 - clamp01(policy.jitter) * clamp01(random));
  const delayMs = Math.ceil(Math.max(jittered, error.retryAfterMs ?? 0));
  return { retry: true, delayMs, retryAt: now + delayMs };
}

/** HTTP statuses that are never retried, whatever else the error says: the request itself is wrong. */
const NEVER_RETRIED = new Set([400, 401, 403]);

/** Socket and DNS failures that a later attempt may not meet. */
const NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EAI_AGAIN",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_CLOSED",
]);

/**
 * Reads what an error says about itself, as the journal records a failed attempt: its cause
 * (`errorCause`: name, message, HTTP status), whether it is retryable, and how long the server asked
 * to wait. Retryable: never for 400, 401 and 403; otherwise what the error says (`isRetryable`),
 * else HTTP 408, 409, 429 and 5xx, and network failures (a socket reset, a refused connection,
 * `fetch failed`). `now` turns an HTTP-date `Retry-After` into a wait.
 *
 * @example
 * attemptError(new APICallError({ statusCode: 429, responseHeaders: { "retry-after": "1" }, … }), Date.now());
 * // { name: "AI_APICallError", message: "…", status: 429, retryable: true, retryAfterMs: 1000 }
 */
export function attemptError(error: unknown, now: number): AttemptError {
  const cause = errorCause(error);
  const e = (typeof error === "object" && error !== null ? error : {}) as Record<string, unknown>;
  let status = cause.status;
  let retryAfterMs: number | undefined;
  let network = false;
  try {
    status ??= statusOf(e);
    retryAfterMs = retryAfter(headersOf(e), now);
    network = status === undefined && isNetworkError(error);
  } catch {
    // a getter that throws tells nothing more than the cause already says
  }
  const retryable =
    status !== undefined && NEVER_RETRIED.has(status)
      ? false
      : (cause.retryable ??
        (status !== undefined ? status === 408 || status === 409 || status === 429 || status >= 500 : network));
  return {
    ...cause,
    ...(status === undefined ? {} : { status }),
    retryable,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  };
}

/** `response.status` of fetch-like errors (`statusCode` and `status` are errorCause's). */
function statusOf(e: Record<string, unknown>): number | undefined {
  const status = (e.response as { status?: unknown } | undefined)?.status;
  return typeof status === "number" && Number.isInteger(status) && status >= 100 && status <= 599 ? status : undefined;
}

/** Response headers as lower-case name → value, from a plain record or a `Headers`. */
function headersOf(e: Record<string, unknown>): (name: string) => string | undefined {
  const response = e.response as { headers?: unknown } | undefined;
  const raw = e.responseHeaders ?? e.headers ?? response?.headers;
  if (raw && typeof (raw as Headers).get === "function") {
    return (n) => (raw as Headers).get(n) ?? undefined;
  }
  if (raw && typeof raw === "object") {
    const map = new Map<string, string>();
    for (const [k, v] of Object.entries(raw)) if (typeof v === "string") map.set(k.toLowerCase(), v);
    return (n) => map.get(n);
  }
  return () => undefined;
}

/** `retry-after-ms` (milliseconds), else `retry-after` (seconds, or an HTTP date). */
export function retryAfter(header: (name: string) => string | undefined, now: number): number | undefined {
  const ms = Number.parseFloat(header("retry-after-ms") ?? "");
  if (Number.isFinite(ms) && ms >= 0) return Math.ceil(ms);
  const value = header("retry-after")?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function isNetworkError(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    const { code, name, message, cause } = e as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown };
    if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
    if (name === "TypeError" && message === "fetch failed") return true;
    e = cause;
  }
  return false;
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return "(an error that cannot be printed)";
  }
}

const clamp01 = (x: number) => (Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0);

/**
 * Checks a retry policy given in a loop's configuration; `where` names it in the message
 * (`retry.model`, `tools.lookup.retry`). Returns the policy completed with the defaults'
 * missing fields.
 */
export function validateRetryPolicy(
  given: Partial<RetryPolicy> | undefined,
  defaults: RetryPolicy,
  where: string,
  fail: (message: string) => Error,
): RetryPolicy {
  if (given === undefined) return defaults;
  if (typeof given !== "object" || given === null) throw fail(`${where} must be a retry policy object`);
  const policy = { ...defaults, ...given };
  const need = (ok: boolean, field: string, rule: string) => {
    if (!ok)
      throw fail(`${where}.${field} must be ${rule} (got ${safeString((policy as Record<string, unknown>)[field])})`);
  };
  need(Number.isInteger(policy.maxAttempts) && policy.maxAttempts >= 1, "maxAttempts", "a whole number ≥ 1");
  need(Number.isFinite(policy.initialDelayMs) && policy.initialDelayMs >= 0, "initialDelayMs", "a number ≥ 0");
  need(
    Number.isFinite(policy.maxDelayMs) && policy.maxDelayMs >= policy.initialDelayMs,
    "maxDelayMs",
    "≥ initialDelayMs",
  );
  need(Number.isFinite(policy.factor) && policy.factor >= 1, "factor", "a number ≥ 1");
  need(Number.isFinite(policy.jitter) && policy.jitter >= 0 && policy.jitter <= 1, "jitter", "a number from 0 to 1");
  need(policy.retryable === undefined || typeof policy.retryable === "function", "retryable", "a function");
  return policy;
}

/**
 * What a tool returns to wait (docs/waits.md): a {@link WaitRequest} made by `ToolContext.sleep`,
 * `waitUntil` or `waitForEvent`. The runtime journals it as the decision `<stepId>:wait` and the
 * run interrupts with `waiting`; the call's output is what ends the wait (the wake, or the event's
 * payload). Event tokens are made here: unguessable, and journaled only as their digest.
 */
import { createHash, randomBytes } from "node:crypto";
import type { WaitChoice } from "../policies/wait.ts";

/** The prefix of an event token: the token format's version. */
const TOKEN_PREFIX = "lw1";

/**
 * A tool's request to wait, returned from its `execute` (never thrown). Make it with the
 * context's `sleep`, `waitUntil` or `waitForEvent`.
 *
 * @example
 * execute: (_input, ctx) => ctx.sleep(3 * 86_400_000, { result: "three days later" })
 */
export class WaitRequest {
  /** What is journaled (`<stepId>:wait`). */
  readonly choice: WaitChoice;
  constructor(choice: WaitChoice) {
    this.choice = choice;
  }
}

/**
 * A wait for an event: hand `token` to whoever will deliver it (`deliverEvent(journal, token,
 * payload)`, `loom deliver`, an `eventWebhook`), then return this from `execute`.
 *
 * @example
 * const wait = ctx.waitForEvent({ timeoutMs: 86_400_000, what: "payment of order 42" });
 * await payments.checkout({ orderId: 42, webhook: `${base}/events/${wait.token}` });
 * return wait;
 */
export class EventWait extends WaitRequest {
  /** The single-use secret a delivery must bring. Never journaled: only its sha256 is. */
  readonly token: string;
  constructor(choice: WaitChoice, token: string) {
    super(choice);
    this.token = token;
  }
}

/** True when a tool's output is a request to wait. */
export const isWaitRequest = (value: unknown): value is WaitRequest => value instanceof WaitRequest;

/** Options of `ToolContext.sleep` and `waitUntil`. */
export interface SleepOptions {
  /** The call's output once it wakes (default `{ woke: <ISO time> }`), fed to the model. */
  readonly result?: unknown;
  /** What the wait is for, shown by `loom show`, `listWaits` and the viewer. */
  readonly what?: string;
}

/** Options of `ToolContext.waitForEvent`. */
export interface EventWaitOptions {
  /** After this many ms without a delivery, the call fails with `wait-expired` (fed to the model). */
  readonly timeoutMs?: number;
  /** What the wait is for, shown by `loom show`, `listWaits` and the viewer. */
  readonly what?: string;
}

/** The waiting half of `ToolContext`: made by the runtime for each call, with the run's clock. */
export interface WaitContext {
  /**
   * Waits `ms` from now (the run's clock), durably: return what it gives from `execute`.
   *
   * @example
   * execute: (_input, ctx) => ctx.sleep(3 * 86_400_000)
   */
  sleep(ms: number, options?: SleepOptions): WaitRequest;
  /**
   * Waits until `at`, durably: return what it gives from `execute`.
   *
   * @example
   * execute: ({ at }, ctx) => ctx.waitUntil(new Date(at))
   */
  waitUntil(at: Date | number | string, options?: SleepOptions): WaitRequest;
  /**
   * Waits for an event: hand out `token`, then return the wait from `execute`. The delivered
   * payload is the call's output.
   *
   * @example
   * const wait = ctx.waitForEvent({ timeoutMs: 3_600_000 });
   * await mailer.send({ to: reviewer, body: `reply with token ${wait.token}` });
   * return wait;
   */
  waitForEvent(options?: EventWaitOptions): EventWait;
}

/**
 * The waiting methods of a call's context: times are read from `now` (the run's clock).
 *
 * @internal
 */
export function waitContext(runId: string, stepId: string, now: () => number): WaitContext {
  return {
    sleep: (ms, options) => sleepUntil(stepId, now() + Math.max(0, ms), options),
    waitUntil: (at, options) =>
      sleepUntil(stepId, at instanceof Date ? at.getTime() : typeof at === "string" ? Date.parse(at) : at, options),
    waitForEvent: (options) => {
      const token = makeEventToken(runId, stepId);
      const timeoutMs = options?.timeoutMs;
      const choice: WaitChoice = {
        kind: "event",
        tokenDigest: eventTokenDigest(token),
        ...(timeoutMs === undefined ? {} : { expiresAt: new Date(now() + Math.max(0, timeoutMs)).toISOString() }),
        ...(options?.what === undefined ? {} : { what: options.what }),
      };
      return new EventWait(choice, token);
    },
  };
}

/** The wait of `sleep` and `waitUntil`: until `at` (ms since the epoch). */
function sleepUntil(stepId: string, at: number, options: SleepOptions | undefined): WaitRequest {
  if (!Number.isFinite(at)) throw new RangeError(`step ${stepId}: a wait needs a finite time, not ${at}`);
  const choice: WaitChoice = {
    kind: "sleep",
    until: new Date(at).toISOString(),
    ...(options?.result === undefined ? {} : { result: options.result }),
    ...(options?.what === undefined ? {} : { what: options.what }),
  };
  return new WaitRequest(choice);
}

/**
 * A new event token: `lw1.<run and step, base64url>.<32 random bytes, base64url>`. The run and
 * step say where to deliver (they are not secret); the random part is the secret. Only the
 * token's sha256 is journaled.
 *
 * @internal
 */
export function makeEventToken(runId: string, stepId: string): string {
  const where = Buffer.from(JSON.stringify([runId, stepId]), "utf8").toString("base64url");
  return `${TOKEN_PREFIX}.${where}.${randomBytes(32).toString("base64url")}`;
}

/**
 * The run and step an event token names, or undefined when it is not a token's form.
 *
 * @example
 * parseEventToken("not a token"); // undefined
 */
export function parseEventToken(token: string): { readonly runId: string; readonly stepId: string } | undefined {
  const parts = token.split(".");
  if (parts.length !== 3 || parts[0] !== TOKEN_PREFIX || (parts[2] ?? "").length < 43) return undefined;
  try {
    const where = JSON.parse(Buffer.from(parts[1] ?? "", "base64url").toString("utf8")) as unknown;
    if (!Array.isArray(where) || where.length !== 2) return undefined;
    const [runId, stepId] = where as unknown[];
    return typeof runId === "string" && typeof stepId === "string" ? { runId, stepId } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What the journal keeps of a token: its sha256, hex.
 *
 * @example
 * eventTokenDigest("lw1.…"); // "9f86d0…" (64 hex digits)
 */
export function eventTokenDigest(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** The input of {@link sleepTool}: how long, or until when, and why. */
export interface SleepToolInput {
  /** Seconds to sleep. */
  readonly seconds?: number;
  /** An ISO 8601 time to sleep until (instead of `seconds`). */
  readonly until?: string;
  /** Why: shown to operators while the run waits. */
  readonly reason?: string;
}

/**
 * A built-in tool the model may call to wait durably ("check again in 3 days"): the run stops and
 * holds nothing until the time comes, then the model is told `{ woke: <time> }`. Add it to a
 * loop's tools under any name. An input with neither a positive `seconds` nor a valid `until`
 * throws (the model is told the error).
 *
 * @example
 * agentLoop$({ id: "reminders", model, tools: { sleep: sleepTool } });
 */
export const sleepTool = {
  description:
    "Wait durably, then continue: for `seconds` seconds, or until the ISO 8601 time `until`. The run stops while it waits and resumes when the time comes; the result says when it woke.",
  inputSchema: {
    type: "object",
    properties: {
      seconds: { type: "number", minimum: 0, description: "seconds to wait" },
      until: { type: "string", description: "ISO 8601 time to wait until" },
      reason: { type: "string", description: "why, shown to operators" },
    },
    additionalProperties: false,
  },
  /** Returns the wait: until `until` when it is a valid time, else `seconds` from now. */
  execute(input: SleepToolInput, context: WaitContext): WaitRequest {
    const what = typeof input?.reason === "string" ? { what: input.reason } : {};
    if (typeof input?.until === "string" && !Number.isNaN(Date.parse(input.until)))
      return context.waitUntil(input.until, what);
    if (typeof input?.seconds === "number" && Number.isFinite(input.seconds) && input.seconds >= 0)
      return context.sleep(input.seconds * 1000, what);
    throw new TypeError('sleep needs { "seconds": <number ≥ 0> } or { "until": "<ISO 8601 time>" }');
  },
};

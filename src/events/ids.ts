import { sha256Hex } from "../core/digest.ts";
import { AgentLoopConfigError } from "../core/errors.ts";
import { MODE_PIN_SOURCE, MODE_PIN_SUFFIX } from "./modePin.ts";
import { TOOL_LIST_INFIX, TOOL_LIST_SOURCE } from "./toolList.ts";

/**
 * The journal's id grammar, written once: run ids and sub-agents' run ids, frame ids,
 * decision ids and the names they are built from. Every layer (machines, projections, runtime,
 * readers) makes and reads ids through this module only.
 *
 * Frame and decision ids are deterministic, made from the loop id, the turn and the call's index: completion
 * order never changes them, so a resumed run asks for exactly the frames the first attempt recorded.
 */

/**
 * What a loop id and a tool source's name may be: letters, digits, `_`, `.`, `:` and `-`. They
 * prefix or end frame and decision ids (`<loop>#turn:…`, `<loop>#tools:<name>`).
 *
 * @example
 * isIdName("support"); // true
 * isIdName("my loop"); // false
 */
export const isIdName = (name: unknown): name is string => typeof name === "string" && /^[A-Za-z0-9_.:-]+$/.test(name);

/** `<loop>#turn:<i>:model` */
export const modelFrameId = (loopId: string, turn: number): string => `${loopId}#turn:${turn}:model`;

/** `<loop>#turn:<i>:tool:<j>`: the tool frame id and the call's step id (the same in every run of the loop). */
export const toolStepId = (loopId: string, turn: number, index: number): string =>
  `${loopId}#turn:${turn}:tool:${index}`;

/** The namespace of {@link idempotencyKey}'s name-based UUIDs (fixed: changing it changes every key). */
const IDEMPOTENCY_NAMESPACE = Buffer.from("90cf06fb60d34589861f2d2212efd4ce", "hex");

/**
 * The idempotency key of a tool call: the key to hand a payment API or any service that must not
 * act twice (`ToolContext.idempotencyKey`, and `_meta["loom/idempotencyKey"]` for an MCP server).
 * It names the run AND the step: a step id alone (`support#turn:4:tool:0`) is the same in every
 * run of a loop, so two customers' refunds would share it. The same run and step give the same key
 * on every attempt, every resume and in every process, since it is computed, never stored.
 *
 * Its form is a name-based UUID (RFC 9562 UUIDv8, SHA-256 of a fixed namespace and
 * `JSON.stringify([runId, stepId])`, as the RFC's Appendix B.2 shows), 36 characters, because:
 * run ids run to 512 bytes of any Unicode and step ids hold `#`, `:` and `/`, while services cap a
 * key's length (some at 45 or 64 characters), ask for a UUID, or carry it in an HTTP header
 * (ASCII only); and a run id may name a customer, which a digest does not hand to a third party.
 * Operators can compute it from a run and step id to find the call at the service.
 *
 * @example
 * idempotencyKey("order-1042", "support#turn:4:tool:0"); // "168a4710-a30f-8505-8645-a28c7fcae01c", on every resume
 * idempotencyKey("order-1043", "support#turn:4:tool:0"); // "b91fe23d-b684-8475-9f55-0a1868ef6a5d": another run
 */
export function idempotencyKey(runId: string, stepId: string): string {
  const name = Buffer.from(JSON.stringify([runId, stepId]), "utf8");
  const hex = sha256Hex(Buffer.concat([IDEMPOTENCY_NAMESPACE, name]));
  // The first 128 bits, with the version (8) in the 13th hex digit and the variant (10xx) in the 17th.
  const variant = ((Number.parseInt(hex.charAt(16), 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** `<loop>#toolCallLog`: the mode pin decision. */
export const modePinId = (loopId: string): string => `${loopId}${MODE_PIN_SUFFIX}`;

/** `<loop>#tools:<source>`: a tool source's list (an MCP server's tools), journaled once per run. */
export const toolListId = (loopId: string, source: string): string => `${loopId}${TOOL_LIST_INFIX}${source}`;

/** `<loop>#trace`: the trace context of the run's first attempt, decided once (`loom-agent/otel`). */
export const traceContextId = (loopId: string): string => `${loopId}#trace`;

/** `<loop>#turn:<i>:context`: what a context policy decided the model is sent at model call i (journaled once). */
export const contextDecisionId = (loopId: string, turn: number): string => `${loopId}#turn:${turn}:context`;

/**
 * `<loop>#turn:<i>:budget`: how the sub-agents that model call i started share what is left of the
 * run's budget (the usage before them and their step ids), journaled once, before the first of them runs.
 */
export const budgetSharesId = (loopId: string, turn: number): string => `${loopId}#turn:${turn}:budget`;

/** `<loop>#session`: a session's usage before this message's run, when the message was sent with a budget. */
export const sessionBudgetId = (loopId: string): string => `${loopId}#session`;

/** `<loop>#deadline`: the run's deadline (`timeouts.runMs`), decided once at its start. */
export const deadlineId = (loopId: string): string => `${loopId}#deadline`;

/** `<loop>#model`: the model id a budgeted run is priced with, journaled at its start (read by its parent's budget). */
export const modelIdDecisionId = (loopId: string): string => `${loopId}#model`;

/** `<loop>#turn:<i>`: what the ids of turn i's model call and tool calls begin with. */
export const turnId = (loopId: string, turn: number): string => `${loopId}#turn:${turn}`;

/** `<stepId>:outcome`: what the model was fed for a failed tool. */
export const outcomeId = (stepId: string): string => `${stepId}:outcome`;

/** `<stepId>:approval`: approved or declined, with the digest of the input it answers for. */
export const approvalId = (stepId: string): string => `${stepId}:approval`;

/** `<stepId>:wait`: what a waiting tool call waits for (a time, an event token's digest), journaled once. */
export const waitId = (stepId: string): string => `${stepId}:wait`;

/**
 * The step an approval, outcome or wait decision id answers for, or undefined for another id: the
 * inverse of {@link approvalId}, {@link outcomeId} and {@link waitId}.
 *
 * @example
 * decisionStepOf("support#turn:0:tool:1:approval", "approval"); // "support#turn:0:tool:1"
 * decisionStepOf("support#toolCallLog", "outcome"); // undefined
 */
export function decisionStepOf(decisionId: string, kind: "approval" | "outcome" | "wait"): string | undefined {
  const suffix = `:${kind}`;
  return decisionId.endsWith(suffix) ? decisionId.slice(0, -suffix.length) : undefined;
}

/** A frame id taken apart by `parseFrameId`: a model call or a tool call of a turn. */
export type ParsedFrameId =
  | { readonly kind: "model"; readonly loopId: string; readonly turn: number }
  | { readonly kind: "tool"; readonly loopId: string; readonly turn: number; readonly index: number };

const TURN = "#turn:";
const LINE_BREAK = /[\n\r\u2028\u2029]/;

/**
 * Splits a frame id into its parts, or returns undefined for an id Loom does not make: what
 * `/^(.*)#turn:(\d+):(?:model|tool:(\d+))$/` matches, read without the regex's backtracking (the
 * fold parses every frame id it meets). Only the last `#turn:` can be followed by what matches.
 */
export function parseFrameId(frameId: string): ParsedFrameId | undefined {
  const at = frameId.lastIndexOf(TURN);
  if (at < 0) return undefined;
  const turnStart = at + TURN.length;
  const turnEnd = digitsEnd(frameId, turnStart);
  if (turnEnd === turnStart || frameId.charCodeAt(turnEnd) !== 0x3a /* : */) return undefined;
  const loopId = frameId.slice(0, at);
  if (LINE_BREAK.test(loopId)) return undefined; // `.` matches no line break
  const turn = Number(frameId.slice(turnStart, turnEnd));
  const rest = turnEnd + 1;
  if (frameId.length === rest + 5 && frameId.endsWith("model")) return { kind: "model", loopId, turn };
  if (!frameId.startsWith("tool:", rest)) return undefined;
  const indexStart = rest + 5;
  const indexEnd = digitsEnd(frameId, indexStart);
  if (indexEnd === indexStart || indexEnd !== frameId.length) return undefined;
  return { kind: "tool", loopId, turn, index: Number(frameId.slice(indexStart)) };
}

/** Where the run of ASCII digits starting at `from` ends. */
function digitsEnd(s: string, from: number): number {
  let i = from;
  for (let c = s.charCodeAt(i); c >= 0x30 && c <= 0x39; c = s.charCodeAt(++i));
  return i;
}

/**
 * The run id of a sub-agent's run, the child of a parent's tool call: `<parentRunId>/<stepId>`.
 *
 * @example
 * childRunId("ticket-9", "planner#turn:0:tool:1"); // "ticket-9/planner#turn:0:tool:1"
 */
export const childRunId = (parentRunId: string, stepId: string): string => `${parentRunId}/${stepId}`;

/**
 * What the id of every run below `runId` begins with, `<runId>/`: its sub-agents' runs at any depth
 * (and, for a session id, the session's message runs). The prefix to list them by.
 *
 * @example
 * runsBelowPrefix("trip"); // "trip/"
 */
export const runsBelowPrefix = (runId: string): string => `${runId}/`;

/**
 * Whether `runId` names a run below `ancestorRunId` (`<ancestorRunId>/…`), not the run itself.
 *
 * @example
 * isRunBelow("trip/planner#turn:0:tool:0", "trip"); // true
 * isRunBelow("trip-2", "trip"); // false
 */
export const isRunBelow = (runId: string, ancestorRunId: string): boolean =>
  runId.startsWith(runsBelowPrefix(ancestorRunId));

/**
 * The run id of message `n` (0-based) of a session: `<sessionId>/<n>`.
 *
 * @example
 * sessionRunId("chat-7", 2); // "chat-7/2"
 */
export const sessionRunId = (sessionId: string, n: number): string => `${sessionId}/${n}`;

/**
 * The message number of a session's run id, or undefined when `runId` is not one of that
 * session's message runs: the inverse of {@link sessionRunId}.
 *
 * @example
 * sessionMessageOf("chat-7/2", "chat-7"); // 2
 * sessionMessageOf("chat-7/2/planner#turn:0:tool:0", "chat-7"); // undefined
 */
export function sessionMessageOf(runId: string, sessionId: string): number | undefined {
  if (!isRunBelow(runId, sessionId)) return undefined;
  const rest = runId.slice(sessionId.length + 1);
  return /^(0|[1-9][0-9]*)$/.test(rest) ? Number(rest) : undefined;
}

/**
 * The ways `runId` splits into `<parentRunId>/<stepId>` with a tool-call step id, from the last `/`
 * back: the candidates for its parent (only the journal says which parent exists, since a
 * top-level run id may hold a `/` too).
 *
 * @example
 * [...childRunIdSplits("trip/planner#turn:0:tool:0")]; // [{ runId: "trip", stepId: "planner#turn:0:tool:0" }]
 */
export function* childRunIdSplits(runId: string): Generator<{ readonly runId: string; readonly stepId: string }> {
  for (let i = runId.lastIndexOf("/"); i > 0; i = runId.lastIndexOf("/", i - 1)) {
    const stepId = runId.slice(i + 1);
    if (parseFrameId(stepId)?.kind === "tool") yield { runId: runId.slice(0, i), stepId };
  }
}

/** A tool step's call as a tool-call frame id ends: `…#turn:<i>:tool:<j>`, before a `/` or the end. */
const STEP_END = /#turn:\d+:tool:\d+(?=\/|$)/g;

/**
 * The step ids of the calls from run `rootRunId` down to its descendant run `runId` (`[]` for the
 * root itself, undefined for a run that is not below it): `runId` is
 * `<rootRunId>/<stepId>/<stepId>…`, one step per generation.
 *
 * @example
 * subRunSteps("trip", "trip/planner#turn:0:tool:0/researcher#turn:1:tool:2"); // ["planner#turn:0:tool:0", "researcher#turn:1:tool:2"]
 */
export function subRunSteps(rootRunId: string, runId: string): string[] | undefined {
  if (runId === rootRunId) return [];
  if (!runId.startsWith(`${rootRunId}/`)) return undefined;
  const rest = runId.slice(rootRunId.length + 1);
  const path: string[] = [];
  let from = 0;
  for (const m of rest.matchAll(STEP_END)) {
    const end = (m.index ?? 0) + m[0].length;
    path.push(rest.slice(from, end));
    from = end + 1;
  }
  return from === rest.length + 1 ? path : undefined;
}

/** The `source` of each decision Loom journals, by what it decides. */
export const DECISION_SOURCES = {
  modePin: MODE_PIN_SOURCE,
  outcome: "tool-outcome",
  approval: "approval",
  toolList: TOOL_LIST_SOURCE,
  traceContext: "trace-context",
  wait: "wait",
  deadline: "run-deadline",
  modelId: "budget-model",
  context: "context-policy",
  sessionBudget: "session-budget",
} as const;

/**
 * What a run id may be, written once: every store (append, read, compact), `loop.run` and
 * `submitRun` refuse any other id before touching the journal.
 *
 * A run id is a string of 1 to {@link MAX_RUN_ID_BYTES} UTF-8 bytes, of well-formed Unicode
 * (no lone surrogate), with no control character (Unicode category Cc: U+0000–U+001F,
 * U+007F–U+009F). Why: a lone surrogate has no UTF-8 form, so PostgreSQL (and any store that
 * encodes to UTF-8) replaces it with U+FFFD and two distinct ids become one run; NUL is refused
 * by PostgreSQL but kept by SQLite; other controls make ids that print as something else in a
 * terminal or a log line. The byte limit keeps ids inside every store's index key limits.
 */

/** The most UTF-8 bytes a run id may take. */
export const MAX_RUN_ID_BYTES = 512;

// In a `u` regex a surrogate pair is one code point, so \p{Cs} matches lone surrogates only.
const FORBIDDEN = /[\p{Cc}\p{Cs}]/u;

/** The rule, as error messages state it. */
export const RUN_ID_RULE = `a run id is 1 to ${MAX_RUN_ID_BYTES} UTF-8 bytes of well-formed Unicode with no control characters (U+0000–U+001F, U+007F–U+009F)`;

/**
 * Why `runId` is not a valid run id, or undefined when it is.
 *
 * @example
 * runIdProblem("order-42"); // undefined
 * runIdProblem("a\u0000b"); // "it holds the control character U+0000 at index 1"
 */
export function runIdProblem(runId: unknown): string | undefined {
  if (typeof runId !== "string") return `it is ${runId === null ? "null" : `a ${typeof runId}`}, not a string`;
  if (runId.length === 0) return "it is empty";
  // Each UTF-16 unit takes at most 3 UTF-8 bytes: short ids need no count.
  if (runId.length * 3 > MAX_RUN_ID_BYTES) {
    const bytes = Buffer.byteLength(runId, "utf8");
    if (bytes > MAX_RUN_ID_BYTES) return `it takes ${bytes} UTF-8 bytes`;
  }
  const bad = FORBIDDEN.exec(runId);
  if (bad === null) return undefined;
  const unit = `U+${bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
  return /\p{Cs}/u.test(bad[0])
    ? `it holds a lone surrogate (${unit} at index ${bad.index}), which is not well-formed Unicode`
    : `it holds the control character ${unit} at index ${bad.index}`;
}

/**
 * Throws `AgentLoopConfigError` (code `invalidRunId`) unless `runId` is a valid run id (see
 * {@link runIdProblem}). The message shows the id escaped, says what is wrong and states the rule.
 * `where` names the call that was refused (`append`, `loop.run`…).
 *
 * @example
 * checkRunId(request.runId, "loop.run"); // throws for "a\ud800", "", "x\n"
 */
export function checkRunId(runId: unknown, where: string): asserts runId is string {
  const problem = runIdProblem(runId);
  if (problem === undefined) return;
  throw new AgentLoopConfigError(
    `${where}: ${escapeRunId(runId)} is not a valid run id: ${problem}; ${RUN_ID_RULE}. Choose another id.`,
    "invalidRunId",
  );
}

/**
 * A run id (or any value given as one) as a quoted, printable string: control characters and
 * lone surrogates escaped as `\uXXXX`, ids longer than 80 characters cut with a count.
 *
 * @example
 * escapeRunId("a\u0000b"); // "\"a\\u0000b\""
 */
export function escapeRunId(runId: unknown): string {
  if (typeof runId !== "string") return String(runId);
  const shown = runId.length > 80 ? runId.slice(0, 80) : runId;
  // JSON.stringify escapes C0 controls, quotes and lone surrogates; C1 controls it leaves as they are.
  const quoted = JSON.stringify(shown).replace(
    /[\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  return runId.length > 80 ? `${quoted}… (${runId.length} characters)` : quoted;
}

/**
 * The run id of a schedule's tick: `<scheduleId>@<tick as ISO 8601 UTC, ms>`. The same schedule and
 * tick give the same id in every process, so a tick fired twice (two schedulers, a retry after a
 * crash) names one run, which the journal starts once. The schedule id follows `isIdName` (so it holds no `@`).
 *
 * @example
 * scheduleRunId("digest", new Date("2026-03-01T09:00:00Z")); // "digest@2026-03-01T09:00:00.000Z"
 */
export const scheduleRunId = (scheduleId: string, tick: Date): string => `${scheduleId}@${tick.toISOString()}`;

const TICK_ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * The tick a schedule's run id names, or undefined when `runId` is not a run of that schedule:
 * the inverse of {@link scheduleRunId}. Ids of one schedule sort by tick (fixed-width ISO form).
 *
 * @example
 * scheduleTickOf("digest@2026-03-01T09:00:00.000Z", "digest"); // Date 2026-03-01T09:00:00.000Z
 * scheduleTickOf("digest-2@2026-03-01T09:00:00.000Z", "digest"); // undefined
 */
export function scheduleTickOf(runId: string, scheduleId: string): Date | undefined {
  if (!runId.startsWith(`${scheduleId}@`)) return undefined;
  const iso = runId.slice(scheduleId.length + 1);
  if (!TICK_ISO.test(iso)) return undefined;
  const tick = new Date(iso);
  return Number.isNaN(tick.getTime()) || tick.toISOString() !== iso ? undefined : tick;
}

/** The schedule and tick a run id names (`<scheduleId>@<tick>`), read by {@link scheduledRunOf}. */
export interface ScheduledRun {
  readonly scheduleId: string;
  readonly tick: Date;
}

/**
 * The schedule and tick a run came from, read from its id (`<scheduleId>@<ISO tick>`, as
 * {@link scheduleRunId} writes it), or undefined when the id is not of that form: what
 * `loom runs`, `loom show` and the viewer say of a scheduled run. A sub-agent's run
 * (`digest@…/digest#turn:0:tool:0`) is its parent's, not the schedule's.
 *
 * @example
 * scheduledRunOf("digest@2026-03-01T09:00:00.000Z"); // { scheduleId: "digest", tick: Date 2026-03-01T09:00:00.000Z }
 * scheduledRunOf("support-42"); // undefined
 */
export function scheduledRunOf(runId: string): ScheduledRun | undefined {
  const at = runId.indexOf("@");
  if (at <= 0) return undefined;
  const scheduleId = runId.slice(0, at);
  if (!isIdName(scheduleId)) return undefined;
  const tick = scheduleTickOf(runId, scheduleId);
  return tick === undefined ? undefined : { scheduleId, tick };
}

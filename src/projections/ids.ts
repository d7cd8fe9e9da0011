import { sha256Hex } from "../core/digest.ts";
import { MODE_PIN_SOURCE, MODE_PIN_SUFFIX } from "../events/modePin.ts";
import { TOOL_LIST_INFIX, TOOL_LIST_SOURCE } from "../events/toolList.ts";

/**
 * The deterministic ids of a run (the record's ADR 0061): completion order never changes them,
 * so a resumed run asks for exactly the frames the first attempt recorded.
 */

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

/** `<stepId>:outcome`: what the model was fed for a failed tool. */
export const outcomeId = (stepId: string): string => `${stepId}:outcome`;

/** `<stepId>:approval`: approved or declined, with the digest of the input it answers for. */
export const approvalId = (stepId: string): string => `${stepId}:approval`;

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

export const DECISION_SOURCES = {
  modePin: MODE_PIN_SOURCE,
  outcome: "tool-outcome",
  approval: "approval",
  toolList: TOOL_LIST_SOURCE,
} as const;

import { MODE_PIN_SOURCE, MODE_PIN_SUFFIX } from "../events/modePin.ts";
import { TOOL_LIST_INFIX, TOOL_LIST_SOURCE } from "../events/toolList.ts";

/**
 * The deterministic ids of a run (the record's ADR 0061): completion order never changes them,
 * so a resumed run asks for exactly the frames the first attempt recorded.
 */

/** `<loop>#turn:<i>:model` */
export const modelFrameId = (loopId: string, turn: number): string => `${loopId}#turn:${turn}:model`;

/** `<loop>#turn:<i>:tool:<j>`: the tool frame id, the call's step id and idempotency key. */
export const toolStepId = (loopId: string, turn: number, index: number): string =>
  `${loopId}#turn:${turn}:tool:${index}`;

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

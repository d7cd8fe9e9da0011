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

const FRAME = /^(.*)#turn:(\d+):(?:model|tool:(\d+))$/;

/** Splits a frame id into its parts, or returns undefined for an id Loom does not make. */
export function parseFrameId(frameId: string): ParsedFrameId | undefined {
  const m = FRAME.exec(frameId);
  if (!m) return undefined;
  const loopId = m[1] as string;
  const turn = Number(m[2]);
  return m[3] === undefined ? { kind: "model", loopId, turn } : { kind: "tool", loopId, turn, index: Number(m[3]) };
}

export const DECISION_SOURCES = {
  modePin: MODE_PIN_SOURCE,
  outcome: "tool-outcome",
  approval: "approval",
  toolList: TOOL_LIST_SOURCE,
} as const;

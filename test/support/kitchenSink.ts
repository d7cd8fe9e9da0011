import type { BlobStore } from "../../src/events/spi.ts";
import type { ModelResponse, ToolCall } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { ToolCallLogMode } from "../../src/projections/types.ts";
import { agentLoop$ } from "../../src/runtime/agentLoop.ts";
import type { Tool } from "../../src/runtime/config.ts";

/**
 * The reliability scenario: a run that exercises every path a tool call can take, so a crash,
 * a kill or a resume can land on each of them. Every turn asks for three calls at once: `fetch`
 * (async, so it settles after the others), and two picked from {@link CALL_KINDS} in rotation,
 * so five turns already cover every kind. Everything is a pure function of the turn, so a
 * resumed run (in this process or another) must end byte-identical to an uninterrupted one.
 */

/** The second and third call of a turn, in rotation: every settle/run/fail path of a call. */
export const CALL_KINDS = [
  "failing tool",
  "unknown tool",
  "input too large",
  "invalid input (validateInput)",
  "declined approval",
  "approved call",
  "search_tools",
  "activate_skill",
  "output with no JSON form",
  "valid input (validateInput)",
] as const;

export type CallKind = (typeof CALL_KINDS)[number];

/** Outputs of `fetch` on even turns are above this, so they are claim-checked. */
export const CLAIM_CHECK_THRESHOLD = 1024;
const MAX_TOOL_INPUT_BYTES = 200;

function callOf(kind: CallKind, turn: number, slot: number): ToolCall {
  const id = `t${turn}.${slot}`;
  switch (kind) {
    case "failing tool":
      return { id, name: "broken", input: { turn } };
    case "unknown tool":
      return { id, name: "no_such_tool", input: { turn } };
    case "input too large":
      return { id, name: "lookup", input: { key: turn, pad: "p".repeat(MAX_TOOL_INPUT_BYTES) } };
    case "invalid input (validateInput)":
      return { id, name: "strict", input: { n: `not a number ${turn}` } };
    case "declined approval":
      return { id, name: "transfer", input: { amount: 500 + turn } };
    case "approved call":
      return { id, name: "transfer", input: { amount: turn + 1 } };
    case "search_tools":
      return { id, name: "search_tools", input: { query: turn % 2 === 0 ? "page" : "money" } };
    case "activate_skill":
      return { id, name: "activate_skill", input: { name: turn % 4 === 3 ? "juggling" : "careful" } };
    case "output with no JSON form":
      return { id, name: "opaque", input: { turn } };
    case "valid input (validateInput)":
      return { id, name: "strict", input: { n: turn } };
  }
}

/** The kinds turn `turn` asks for (beside `fetch`). */
export const kindsOfTurn = (turn: number): [CallKind, CallKind] => [
  CALL_KINDS[(2 * turn) % CALL_KINDS.length] as CallKind,
  CALL_KINDS[(2 * turn + 1) % CALL_KINDS.length] as CallKind,
];

/** The model's answer at `turn` of a `turns`-turn run. */
export function kitchenSinkResponse(turn: number, turns: number): ModelResponse {
  if (turn >= turns) return { content: `done after ${turn} turns`, toolCalls: [] };
  const [a, b] = kindsOfTurn(turn);
  return {
    content: `turn ${turn}`,
    toolCalls: [
      { id: `t${turn}.0`, name: "fetch", input: { page: turn, big: turn % 2 === 0 } },
      callOf(a, turn, 1),
      callOf(b, turn, 2),
    ],
  };
}

export interface KitchenSinkOptions {
  /** Model calls that ask for tools; the run makes `turns + 1` model calls. */
  readonly turns: number;
  readonly mode?: ToolCallLogMode;
  /** Where claim-checked outputs go: keep the same one across a crash and its resume. */
  readonly blobs: BlobStore;
  /** Milliseconds `fetch` works for (default 0: still a macrotask, so it settles after the others). */
  readonly toolDelayMs?: number;
  /** Called as each tool starts (after counting it) and as the model is called. */
  readonly onEffect?: (what: string) => void;
  readonly id?: string;
  /** Stop after this many model calls (`max-iterations`); default: enough to finish. */
  readonly maxIterations?: number;
}

/**
 * A fresh loop object for the scenario, with fresh counters: `executions` counts tool runs per
 * step id (what `execute` was told), `modelCalls` the model calls.
 */
export function kitchenSink(options: KitchenSinkOptions) {
  const { turns, blobs, toolDelayMs = 0, onEffect } = options;
  const executions = new Map<string, number>();
  const ran = (stepId: string) => {
    executions.set(stepId, (executions.get(stepId) ?? 0) + 1);
    onEffect?.(stepId);
  };
  const tools: Record<string, Tool> = {
    fetch: {
      description: "fetches a page of records",
      execute: async (input, { stepId }) => {
        ran(stepId);
        const { page, big } = input as { page: number; big: boolean };
        await new Promise((r) => setTimeout(r, toolDelayMs));
        const body = big ? `${"record ".repeat(200)}#${page}` : `short page ${page}`;
        return { page, body, fetchedAt: new Date(Date.UTC(2026, 0, 1 + page)) };
      },
    },
    lookup: {
      description: "looks a key up",
      execute: (input, { stepId }) => {
        ran(stepId);
        return { key: (input as { key: number }).key, found: true };
      },
    },
    broken: {
      description: "always fails",
      execute: (input, { stepId }) => {
        ran(stepId);
        throw new Error(`broken on turn ${(input as { turn: number }).turn}`);
      },
    },
    strict: {
      description: "doubles a number",
      validateInput: (input) =>
        typeof (input as { n?: unknown }).n === "number"
          ? { ok: true, value: { n: (input as { n: number }).n, checked: true } }
          : { ok: false, message: "n must be a number" },
      execute: (input, { stepId }) => {
        ran(stepId);
        const { n, checked } = input as { n: number; checked: boolean };
        return { doubled: n * 2, checked };
      },
    },
    transfer: {
      description: "moves money",
      requiresApproval: true,
      execute: (input, { stepId }) => {
        ran(stepId);
        return { moved: (input as { amount: number }).amount };
      },
    },
    opaque: {
      description: "returns a value with no JSON form",
      execute: (input, { stepId }) => {
        ran(stepId);
        return { turn: (input as { turn: number }).turn, big: 10n };
      },
    },
  };
  let modelCalls = 0;
  const model = scriptedModel(({ turn }) => {
    modelCalls++;
    onEffect?.(`model:${turn}`);
    return kitchenSinkResponse(turn, turns);
  });
  const loop = agentLoop$({
    id: options.id ?? "sink",
    model,
    tools,
    maxIterations: options.maxIterations ?? turns + 1,
    maxToolInputBytes: MAX_TOOL_INPUT_BYTES,
    approve: ({ input }) => (input as { amount: number }).amount <= 100,
    claimCheck: { blobs, thresholdBytes: CLAIM_CHECK_THRESHOLD },
    skills: { careful: { description: "double-checks", instructions: "check every number twice" } },
    ...(options.mode === undefined ? {} : { toolCallLog: options.mode }),
  });
  return {
    loop,
    executions,
    get modelCalls() {
      return modelCalls;
    },
  };
}

/**
 * A seeded PRNG (mulberry32): the same seed gives the same sequence, so a random crash or kill
 * point is reproducible from the seed printed with a failure.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

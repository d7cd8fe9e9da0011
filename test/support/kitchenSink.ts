import { modelFrameId, parseFrameId } from "../../src/events/ids.ts";
import type { BlobStore } from "../../src/events/spi.ts";
import type { ModelResponse, ToolCall } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { ToolCallLogMode } from "../../src/projections/types.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

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

/**
 * The outside world's flakiness: how many times each frame's effect was called, over a run and
 * its resumes. It outlives a crash like the store does (a flaky service does not forget it was
 * asked), so whether a call fails depends on the calls made, never on which process made them.
 */
export interface FlakyWorld {
  readonly calls: Map<string, number>;
}

export const flakyWorld = (): FlakyWorld => ({ calls: new Map() });

/**
 * How many first calls of a frame's effect fail in a flaky world: the model's on turns 1, 6, 11,
 * … and `fetch`'s (each turn's first call) on turns 3, 8, 13, …, twice on odd turns and once on
 * even ones. Everything else never fails by flakiness.
 */
export function failuresOf(frameId: string): number {
  const parsed = parseFrameId(frameId);
  if (parsed === undefined || (parsed.kind === "tool" && parsed.index !== 0)) return 0;
  const flakyTurn = parsed.kind === "model" ? parsed.turn % 5 === 1 : parsed.turn % 5 === 3;
  return flakyTurn ? 1 + (parsed.turn % 2) : 0;
}

/** Counts a call of `frameId`'s effect in `world`; true when this call is one that fails. */
function failsNow(world: FlakyWorld, frameId: string): boolean {
  const n = (world.calls.get(frameId) ?? 0) + 1;
  world.calls.set(frameId, n);
  return n <= failuresOf(frameId);
}

/**
 * Retries that cannot run out in a flaky world: at most 2 failures a frame, so the third attempt
 * answers (a crash that loses an attempt's outcome reruns it under the same number). No waiting.
 */
export const FLAKY_RETRY = { maxAttempts: 3, initialDelayMs: 0, maxDelayMs: 0, factor: 2, jitter: 0 } as const;

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
  /**
   * Puts retries in play: the model and `fetch` fail their first calls as {@link failuresOf}
   * says (the model with a 503, then an error marked `isRetryable`; `fetch` with a plain throw),
   * and both retry under {@link FLAKY_RETRY}. Share the world between a run and its resume.
   */
  readonly flaky?: FlakyWorld;
}

/**
 * A fresh loop object for the scenario, with fresh counters: `executions` counts tool runs per
 * step id (what `execute` was told), `modelCalls` the model calls.
 */
export function kitchenSink(options: KitchenSinkOptions) {
  const { turns, blobs, toolDelayMs = 0, onEffect, flaky } = options;
  const loopId = options.id ?? "sink";
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
        const fails = flaky !== undefined && failsNow(flaky, stepId);
        const { page, big } = input as { page: number; big: boolean };
        await new Promise((r) => setTimeout(r, toolDelayMs));
        if (fails) throw new Error(`fetch of page ${page} timed out upstream`);
        const body = big ? `${"record ".repeat(200)}#${page}` : `short page ${page}`;
        return { page, body, fetchedAt: new Date(Date.UTC(2026, 0, 1 + page)) };
      },
      ...(flaky === undefined ? {} : { retry: FLAKY_RETRY }),
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
    if (flaky !== undefined) {
      const frameId = modelFrameId(loopId, turn);
      const before = flaky.calls.get(frameId) ?? 0;
      if (failsNow(flaky, frameId)) {
        throw before === 0
          ? Object.assign(new Error(`model overloaded on turn ${turn}`), { statusCode: 503 })
          : Object.assign(new Error(`model connection reset on turn ${turn}`), { isRetryable: true });
      }
    }
    return kitchenSinkResponse(turn, turns);
  });
  const loop = agentLoop$({
    id: loopId,
    model,
    tools,
    maxIterations: options.maxIterations ?? turns + 1,
    maxToolInputBytes: MAX_TOOL_INPUT_BYTES,
    approve: ({ input }) => (input as { amount: number }).amount <= 100,
    claimCheck: { blobs, thresholdBytes: CLAIM_CHECK_THRESHOLD },
    skills: { careful: { description: "double-checks", instructions: "check every number twice" } },
    ...(options.mode === undefined ? {} : { toolCallLog: options.mode }),
    ...(flaky === undefined ? {} : { retry: { model: FLAKY_RETRY } }),
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

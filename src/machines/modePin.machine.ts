import { assign, setup } from "xstate";
import { AgentLoopConfigError } from "../core/errors.ts";
import { DECISION_SOURCES, modePinId } from "../events/ids.ts";
import type { DecisionRecordedData } from "../events/types.ts";
import type { ToolCallLogMode } from "../projections/types.ts";

/**
 * The mode pin: which shape a run's tool-call log has, fixed for
 * the life of the run. The machine is stepped from facts: the pin the journal recorded, whether
 * the run completed, then the configured option. It does no I/O: journaling the pin is the
 * `journalPin` action, which the runtime executes (see {@link resolveModePin}).
 */

/** What `modePinMachine` is started with: the run it pins. */
export interface ModePinInput {
  readonly loopId: string;
  readonly runId: string;
}

/** `modePinMachine`'s context: the pin in force and what contradicted it. */
export interface ModePinContext {
  readonly loopId: string;
  readonly runId: string;
  /** The pin in force: recorded in the journal, or about to be appended by `journalPin`. */
  readonly pin: ToolCallLogMode | undefined;
  /** A completed run is never appended to, so it takes no late pin. */
  readonly runCompleted: boolean;
  /** The configured value that contradicted the pin (set in `mismatch-error`). */
  readonly rejected: ToolCallLogMode | undefined;
}

/** What `modePinMachine` is told: what the journal holds and what the loop is configured with. */
export type ModePinEvent =
  /** The journal holds the pin decision `<loop>#toolCallLog`. */
  | { readonly type: "PIN_RECORDED"; readonly mode: ToolCallLogMode }
  /** The journal holds `run.completed`. */
  | { readonly type: "RUN_COMPLETED" }
  /** The loop's `toolCallLog` option (already validated; undefined when unset). */
  | { readonly type: "CONFIGURED"; readonly mode: ToolCallLogMode | undefined };

/** `modePinMachine`'s states (see the diagram in docs/statecharts.md). */
export type ModePinState = "unset" | "pinned-full" | "pinned-lean" | "mismatch-error";

/** The `journalPin` action's params: the `decision.recorded` data to append. */
export type PinDecision = DecisionRecordedData & { readonly choice: { readonly mode: ToolCallLogMode } };

const eventMode = (event: ModePinEvent): ToolCallLogMode | undefined =>
  event.type === "CONFIGURED" || event.type === "PIN_RECORDED" ? event.mode : undefined;

/**
 * The mode-pin statechart, one row per recorded pin × configured option:
 * none × unset → `unset`; none × M → `pinned-M` + `journalPin` (a completed run: no pin, and a
 * mode other than "full" → `mismatch-error`); P × P → `pinned-P`; P × unset → `pinned-P`;
 * P × Q≠P → `mismatch-error`.
 *
 * @example
 * const [s0] = initialTransition(modePinMachine, { loopId: "support", runId: "r1" });
 * const [s1, actions] = transition(modePinMachine, s0, { type: "CONFIGURED", mode: "lean" });
 * s1.value; // "pinned-lean"; actions[0].type === "journalPin"
 */
export const modePinMachine = setup({
  types: {
    context: {} as ModePinContext,
    events: {} as ModePinEvent,
    input: {} as ModePinInput,
  },
  actions: {
    // Executed by the runtime (an append), never by the machine: `transition()` returns it as an object.
    journalPin: (_, _params: PinDecision) => {},
    adoptPin: assign({ pin: ({ event }) => eventMode(event) }),
    markCompleted: assign({ runCompleted: true }),
    rejectConfigured: assign({ rejected: ({ event }) => eventMode(event) }),
  },
  guards: {
    eventIsFull: ({ event }) => eventMode(event) === "full",
    eventIsLean: ({ event }) => eventMode(event) === "lean",
    configuredUnset: ({ event }) => event.type === "CONFIGURED" && event.mode === undefined,
    // A completed run's recorded shape is full when it recorded no pin.
    contradictsCompletedRun: ({ context, event }) => context.runCompleted && eventMode(event) !== "full",
    runCompleted: ({ context }) => context.runCompleted,
  },
}).createMachine({
  id: "modePin",
  context: ({ input }) => ({
    loopId: input.loopId,
    runId: input.runId,
    pin: undefined,
    runCompleted: false,
    rejected: undefined,
  }),
  initial: "unset",
  states: {
    unset: {
      on: {
        PIN_RECORDED: [
          { guard: "eventIsFull", target: "pinned-full", actions: "adoptPin" },
          { guard: "eventIsLean", target: "pinned-lean", actions: "adoptPin" },
        ],
        RUN_COMPLETED: { actions: "markCompleted" },
        CONFIGURED: [
          { guard: "configuredUnset" },
          { guard: "contradictsCompletedRun", target: "mismatch-error", actions: "rejectConfigured" },
          { guard: "runCompleted" },
          {
            guard: "eventIsFull",
            target: "pinned-full",
            actions: ["adoptPin", { type: "journalPin", params: ({ context }) => pinDecision(context.loopId, "full") }],
          },
          {
            guard: "eventIsLean",
            target: "pinned-lean",
            actions: ["adoptPin", { type: "journalPin", params: ({ context }) => pinDecision(context.loopId, "lean") }],
          },
        ],
      },
    },
    "pinned-full": {
      on: {
        RUN_COMPLETED: { actions: "markCompleted" },
        CONFIGURED: [{ guard: "eventIsLean", target: "mismatch-error", actions: "rejectConfigured" }, {}],
      },
    },
    "pinned-lean": {
      on: {
        RUN_COMPLETED: { actions: "markCompleted" },
        CONFIGURED: [{ guard: "eventIsFull", target: "mismatch-error", actions: "rejectConfigured" }, {}],
      },
    },
    "mismatch-error": { type: "final" },
  },
});

function pinDecision(loopId: string, mode: ToolCallLogMode): PinDecision {
  return { decisionId: modePinId(loopId), source: DECISION_SOURCES.modePin, choice: { mode } };
}

const MODES: readonly unknown[] = ["full", "lean"];

/**
 * Checks a `toolCallLog` option: undefined, "full" or "lean". Anything else throws
 * `AgentLoopConfigError` (code `invalidToolCallLog`) naming the loop and the value.
 *
 * @example
 * validateToolCallLogMode("lean", "support"); // "lean"
 * validateToolCallLogMode("compact", "support"); // throws AgentLoopConfigError
 */
export function validateToolCallLogMode(value: unknown, loopId: string): ToolCallLogMode | undefined {
  if (value === undefined || MODES.includes(value)) return value as ToolCallLogMode | undefined;
  throw new AgentLoopConfigError(
    `loop ${loopId}: toolCallLog is ${describe(value)}, but it must be "full", "lean" or unset (unset means "full" and journals no pin); fix the loop's configuration.`,
    "invalidToolCallLog",
  );
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "function" || typeof value === "symbol") return `a ${typeof value}`;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** What `resolveModePin` decides from: the recorded pin, the configured mode, and whether the run completed. */
export interface ResolveModePinRequest {
  readonly loopId: string;
  readonly runId: string;
  /** The mode of the journal's `<loop>#toolCallLog` decision, if any. */
  readonly recorded?: ToolCallLogMode | undefined;
  /** The loop's `toolCallLog` option, unvalidated. */
  readonly configured?: unknown;
  /** The journal holds `run.completed`. */
  readonly runCompleted: boolean;
}

/** What `resolveModePin` decided: the state, the log's shape, and the pin to append or the error to throw. */
export interface ModePinResolution {
  readonly state: ModePinState;
  /** The shape of the log to return (the recorded one on a mismatch). */
  readonly mode: ToolCallLogMode;
  /** Append `pin` (the `journalPin` action) before anything else is appended. */
  readonly appendPin: boolean;
  /** The `decision.recorded` data to append when `appendPin` is true. */
  readonly pin?: PinDecision;
  /** Throw this before any append (state `mismatch-error`). */
  readonly error?: AgentLoopConfigError;
}

/** What the chart decides from one combination of a run's facts (the run and loop ids aside). */
export interface ModePinDecision {
  readonly state: ModePinState;
  /** The log's shape: the pin in force, or the recorded shape (full when no pin) on a mismatch. */
  readonly mode: ToolCallLogMode;
  /** The chart asks for `journalPin`: the pin is appended. */
  readonly appendPin: boolean;
}

const decision = (state: ModePinState, mode: ToolCallLogMode, appendPin = false): ModePinDecision => ({
  state,
  mode,
  appendPin,
});
/** The facts of one column: the run is still open, or the journal holds `run.completed`. */
/** A mode-pin decision for a run still open and for one that completed (`MODE_PIN_DECISIONS`' cells). */
export type ByCompletion = { readonly open: ModePinDecision; readonly completed: ModePinDecision };
const same = (d: ModePinDecision): ByCompletion => ({ open: d, completed: d });

/**
 * What {@link modePinMachine} decides for every combination of a run's facts: the recorded pin
 * (none, full, lean) × the configured option (unset, full, lean) × whether the run completed. The
 * chart is the rule; this table is what it decides, read by {@link resolveModePin} instead of
 * stepping the chart for every run, and checked against the chart stepped over every combination
 * (test/machines/modePin.test.ts), so the two cannot drift apart.
 *
 * @example
 * MODE_PIN_DECISIONS.none.lean.open; // { state: "pinned-lean", mode: "lean", appendPin: true }
 * MODE_PIN_DECISIONS.lean.full.completed.state; // "mismatch-error"
 */
export const MODE_PIN_DECISIONS: {
  readonly [R in ToolCallLogMode | "none"]: { readonly [C in ToolCallLogMode | "unset"]: ByCompletion };
} = {
  none: {
    unset: same(decision("unset", "full")),
    // A completed run takes no late pin: its recorded shape (full) passes, lean contradicts it.
    full: { open: decision("pinned-full", "full", true), completed: decision("unset", "full") },
    lean: { open: decision("pinned-lean", "lean", true), completed: decision("mismatch-error", "full") },
  },
  full: {
    unset: same(decision("pinned-full", "full")),
    full: same(decision("pinned-full", "full")),
    lean: same(decision("mismatch-error", "full")),
  },
  lean: {
    unset: same(decision("pinned-lean", "lean")),
    full: same(decision("mismatch-error", "lean")),
    lean: same(decision("pinned-lean", "lean")),
  },
};

/**
 * What the runtime must do for a run's facts: the decision of {@link modePinMachine} for them
 * (read from {@link MODE_PIN_DECISIONS}), with the pin to append (the `journalPin` action's
 * params) or the error to throw. Throws `AgentLoopConfigError` at once for an invalid
 * `configured` value; returns a mismatch as `error` (code `toolCallLogMismatch`, naming the run)
 * for the runtime to throw before any append.
 *
 * @example
 * const r = resolveModePin({ loopId: "support", runId: "r1", configured: "lean", runCompleted: false });
 * // r.state === "pinned-lean", r.mode === "lean", r.appendPin === true, r.pin.decisionId === "support#toolCallLog"
 */
export function resolveModePin(request: ResolveModePinRequest): ModePinResolution {
  const configured = validateToolCallLogMode(request.configured, request.loopId);
  const column = MODE_PIN_DECISIONS[request.recorded ?? "none"][configured ?? "unset"];
  const { state, mode, appendPin } = request.runCompleted ? column.completed : column.open;
  if (state === "mismatch-error") return { state, mode, appendPin, error: mismatchError(request, mode, configured) };
  return appendPin ? { state, mode, appendPin, pin: pinDecision(request.loopId, mode) } : { state, mode, appendPin };
}

function mismatchError(
  request: ResolveModePinRequest,
  recorded: ToolCallLogMode,
  configured: ToolCallLogMode | undefined,
): AgentLoopConfigError {
  const { runId, loopId } = request;
  const how = request.recorded === undefined ? " (no pin: the default shape of a completed run)" : "";
  const fix =
    request.recorded === undefined
      ? `a completed run takes no late pin; configure toolCallLog "full" (or unset) to read its output, or rebuild its log in either shape with rebuildToolCallLog(journal, "${runId}", mode)`
      : `a run's log shape is fixed for its life; configure toolCallLog "${recorded}" (or leave it unset) for this run, or start a new run for the "${configured}" shape`;
  return new AgentLoopConfigError(
    `run ${runId} (loop ${loopId}) recorded toolCallLog "${recorded}"${how} but is configured "${configured}"; ${fix}.`,
    "toolCallLogMismatch",
  );
}

import { describe, expect, it } from "vitest";
import { initialTransition, type SnapshotFrom, transition } from "xstate";
import { adjacencyMapToArray, getAdjacencyMap, getShortestPaths } from "xstate/graph";
import { isAgentLoopConfigError } from "../../src/core/errors.ts";
import {
  MODE_PIN_DECISIONS,
  type ModePinDecision,
  type ModePinEvent,
  type ModePinState,
  modePinMachine,
  resolveModePin,
  validateToolCallLogMode,
} from "../../src/machines/modePin.machine.ts";
import type { ToolCallLogMode } from "../../src/projections/types.ts";

type Snapshot = SnapshotFrom<typeof modePinMachine>;
const input = { loopId: "support", runId: "run-1" };

const EVENTS = {
  "PIN_RECORDED full": { type: "PIN_RECORDED", mode: "full" },
  "PIN_RECORDED lean": { type: "PIN_RECORDED", mode: "lean" },
  RUN_COMPLETED: { type: "RUN_COMPLETED" },
  "CONFIGURED unset": { type: "CONFIGURED", mode: undefined },
  "CONFIGURED full": { type: "CONFIGURED", mode: "full" },
  "CONFIGURED lean": { type: "CONFIGURED", mode: "lean" },
} as const satisfies Record<string, ModePinEvent>;
type EventName = keyof typeof EVENTS;

/** The snapshots the machine can be in, each reached from the journal's facts. */
const START: Record<string, readonly EventName[]> = {
  unset: [],
  "unset, run completed": ["RUN_COMPLETED"],
  "pinned-full": ["PIN_RECORDED full"],
  "pinned-lean": ["PIN_RECORDED lean"],
  "pinned-full, run completed": ["PIN_RECORDED full", "RUN_COMPLETED"],
  "pinned-lean, run completed": ["PIN_RECORDED lean", "RUN_COMPLETED"],
  "mismatch-error": ["PIN_RECORDED full", "CONFIGURED lean"],
};

function reach(events: readonly EventName[]): Snapshot {
  let [snapshot] = initialTransition(modePinMachine, input);
  for (const name of events) [snapshot] = transition(modePinMachine, snapshot, EVENTS[name]);
  return snapshot;
}

/** `next state` or `next state + journalPin`; an event missing from a row leaves the state as is, with no action. */
const TABLE: Record<keyof typeof START, Partial<Record<EventName, string>>> = {
  unset: {
    "PIN_RECORDED full": "pinned-full",
    "PIN_RECORDED lean": "pinned-lean",
    RUN_COMPLETED: "unset",
    "CONFIGURED unset": "unset",
    "CONFIGURED full": "pinned-full + journalPin",
    "CONFIGURED lean": "pinned-lean + journalPin",
  },
  "unset, run completed": {
    // Facts may be folded in any order: a pin recorded before run.completed still pins.
    "PIN_RECORDED full": "pinned-full",
    "PIN_RECORDED lean": "pinned-lean",
    "CONFIGURED unset": "unset",
    "CONFIGURED full": "unset",
    "CONFIGURED lean": "mismatch-error",
  },
  "pinned-full": {
    "PIN_RECORDED lean": "pinned-full",
    "CONFIGURED unset": "pinned-full",
    "CONFIGURED full": "pinned-full",
    "CONFIGURED lean": "mismatch-error",
  },
  "pinned-lean": {
    "PIN_RECORDED full": "pinned-lean",
    "CONFIGURED unset": "pinned-lean",
    "CONFIGURED full": "mismatch-error",
    "CONFIGURED lean": "pinned-lean",
  },
  "pinned-full, run completed": {
    "CONFIGURED unset": "pinned-full",
    "CONFIGURED full": "pinned-full",
    "CONFIGURED lean": "mismatch-error",
  },
  "pinned-lean, run completed": {
    "CONFIGURED unset": "pinned-lean",
    "CONFIGURED full": "mismatch-error",
    "CONFIGURED lean": "pinned-lean",
  },
  "mismatch-error": {
    "CONFIGURED unset": "mismatch-error",
    "CONFIGURED full": "mismatch-error",
    "CONFIGURED lean": "mismatch-error",
  },
};

describe("modePinMachine transitions", () => {
  for (const [start, row] of Object.entries(TABLE)) {
    const facts = START[start] ?? [];
    const startState = reach(facts).value as ModePinState;
    for (const name of Object.keys(EVENTS) as EventName[]) {
      const expected = row[name] ?? `${startState}`;
      it(`${start} --${name}--> ${expected}`, () => {
        const [next, actions] = transition(modePinMachine, reach(facts), EVENTS[name]);
        const [state, action] = expected.split(" + ");
        expect(next.value).toBe(state);
        expect(actions.map((a) => a.type)).toEqual(action ? [action] : []);
      });
    }
  }

  it("journalPin carries the decision to append and does nothing itself", () => {
    const [, actions] = transition(modePinMachine, reach([]), EVENTS["CONFIGURED lean"]);
    expect(actions[0]?.params).toEqual({
      decisionId: "support#toolCallLog",
      source: "agent-tool-call-log",
      choice: { mode: "lean" },
    });
  });

  it("ends in mismatch-error (a final state) and remembers the rejected value", () => {
    const snapshot = reach(["PIN_RECORDED lean", "CONFIGURED full"]);
    expect(snapshot.status).toBe("done");
    expect(snapshot.context).toMatchObject({ pin: "lean", rejected: "full" });
  });
});

describe("modePinMachine paths (xstate/graph)", () => {
  const events = Object.values(EVENTS);
  const options = { input, events };

  it("reaches every state by a shortest path", () => {
    const paths = getShortestPaths(modePinMachine, options);
    const reached = new Set(paths.map((p) => p.state.value));
    expect([...reached].sort()).toEqual(["mismatch-error", "pinned-full", "pinned-lean", "unset"]);
    for (const path of paths) {
      // Replaying a path's events with the pure transition() lands on the path's state.
      let replayed = reach([]);
      for (const step of path.steps) [replayed] = transition(modePinMachine, replayed, step.event as ModePinEvent);
      expect(replayed.value).toBe(path.state.value);
    }
  });

  it("has exactly the edges of the table, from every reachable snapshot", () => {
    const edges = adjacencyMapToArray(getAdjacencyMap(modePinMachine, options));
    const byName = (e: ModePinEvent) =>
      (Object.keys(EVENTS) as EventName[]).find((n) => JSON.stringify(EVENTS[n]) === JSON.stringify(e));
    const startOf = (state: Snapshot) =>
      Object.keys(START).find((k) => {
        const s = reach(START[k] ?? []);
        // mismatch-error is final: whatever led there, no event leaves it.
        if (s.value === "mismatch-error") return state.value === "mismatch-error";
        return s.value === state.value && s.context.runCompleted === state.context.runCompleted;
      });
    const covered = new Set<string>();
    for (const { state, event, nextState } of edges) {
      const start = startOf(state);
      expect(start, JSON.stringify(state.context)).toBeDefined();
      const name = byName(event) as EventName;
      const expected = TABLE[start as string]?.[name] ?? String(state.value);
      expect(nextState.value, `${start} --${name}`).toBe(expected.split(" + ")[0]);
      covered.add(`${start} --${name}`);
    }
    // Every (start, event) cell of the table is an edge of the graph (the final state's are self-loops).
    const cells = Object.keys(TABLE).length * Object.keys(EVENTS).length;
    expect(covered.size).toBe(cells);
  });
});

describe("MODE_PIN_DECISIONS: the chart's decision for every combination of the facts", () => {
  const recordedPins = [undefined, "full", "lean"] as const;
  const configuredModes = [undefined, "full", "lean"] as const;
  const completions = [false, true] as const;

  /**
   * The chart stepped over a run's facts with the pure transition(): the journal's facts (in
   * `order`: they may be folded either way), then the configured option; what it decides.
   */
  function stepChart(
    loopId: string,
    recorded: ToolCallLogMode | undefined,
    configured: ToolCallLogMode | undefined,
    runCompleted: boolean,
    order: "pin first" | "completion first",
  ) {
    const facts: ModePinEvent[] = [];
    if (recorded !== undefined) facts.push({ type: "PIN_RECORDED", mode: recorded });
    if (runCompleted) facts.push({ type: "RUN_COMPLETED" });
    if (order === "completion first") facts.reverse();
    let [snapshot] = initialTransition(modePinMachine, { loopId, runId: "run-1" });
    for (const fact of facts) [snapshot] = transition(modePinMachine, snapshot, fact);
    const [last, actions] = transition(modePinMachine, snapshot, { type: "CONFIGURED", mode: configured });
    const state = last.value as ModePinState;
    const journalPin = actions.filter((a) => a.type === "journalPin");
    const mode = state === "mismatch-error" ? (recorded ?? "full") : (last.context.pin ?? "full");
    const decided: ModePinDecision = { state, mode, appendPin: journalPin.length > 0 };
    return { decided, pins: journalPin.map((a) => a.params) };
  }

  const cases = recordedPins.flatMap((recorded) =>
    configuredModes.flatMap((configured) =>
      completions.map((runCompleted) => ({ recorded, configured, runCompleted })),
    ),
  );

  it("covers all 18 combinations (3 recorded × 3 configured × completed or not)", () => {
    expect(cases).toHaveLength(18);
    const cells = Object.values(MODE_PIN_DECISIONS).flatMap((row) =>
      Object.values(row).flatMap((column) => [column.open, column.completed]),
    );
    expect(cells).toHaveLength(18);
  });

  for (const { recorded, configured, runCompleted } of cases) {
    const title = `recorded ${recorded ?? "none"} × configured ${configured ?? "unset"} × ${runCompleted ? "completed" : "open"}`;
    it(`${title}: the table says what the chart decides`, () => {
      const column = MODE_PIN_DECISIONS[recorded ?? "none"][configured ?? "unset"];
      const cell = runCompleted ? column.completed : column.open;
      for (const loopId of ["support", "billing"]) {
        for (const order of ["pin first", "completion first"] as const) {
          const chart = stepChart(loopId, recorded, configured, runCompleted, order);
          expect(cell, `${loopId}, ${order}`).toEqual(chart.decided);
          // What resolveModePin returns is the table's cell, with the chart's own journalPin params.
          const r = resolveModePin({ loopId, runId: "run-1", recorded, configured, runCompleted });
          expect({ state: r.state, mode: r.mode, appendPin: r.appendPin }).toEqual(chart.decided);
          expect(r.pin === undefined ? [] : [r.pin]).toEqual(chart.pins);
          expect(r.error !== undefined).toBe(chart.decided.state === "mismatch-error");
        }
      }
    });
  }

  it("a mismatch found in the table names the run it was found in", () => {
    for (const runId of ["run-7", "run-8"]) {
      const r = resolveModePin({ loopId: "support", runId, recorded: "full", configured: "lean", runCompleted: true });
      expect(r.error?.message).toMatch(new RegExp(`^run ${runId} \\(loop support\\) recorded toolCallLog "full"`));
    }
  });
});

describe("resolveModePin (DESIGN.md §4)", () => {
  const base = { loopId: "support", runId: "run-1", runCompleted: false };
  const rows = [
    { recorded: undefined, configured: undefined, state: "unset", mode: "full", appendPin: false },
    { recorded: undefined, configured: "full", state: "pinned-full", mode: "full", appendPin: true },
    { recorded: undefined, configured: "lean", state: "pinned-lean", mode: "lean", appendPin: true },
    { recorded: "full", configured: "full", state: "pinned-full", mode: "full", appendPin: false },
    { recorded: "lean", configured: "lean", state: "pinned-lean", mode: "lean", appendPin: false },
    { recorded: "full", configured: "lean", state: "mismatch-error", mode: "full", appendPin: false },
    { recorded: "lean", configured: "full", state: "mismatch-error", mode: "lean", appendPin: false },
    { recorded: "full", configured: undefined, state: "pinned-full", mode: "full", appendPin: false },
    { recorded: "lean", configured: undefined, state: "pinned-lean", mode: "lean", appendPin: false },
  ] as const;
  for (const row of rows) {
    it(`recorded ${row.recorded ?? "none"} × configured ${row.configured ?? "unset"} → ${row.state}${row.appendPin ? ", pin appended" : ""}`, () => {
      const r = resolveModePin({ ...base, recorded: row.recorded, configured: row.configured });
      expect({ state: r.state, mode: r.mode, appendPin: r.appendPin }).toEqual({
        state: row.state,
        mode: row.mode,
        appendPin: row.appendPin,
      });
      expect(r.pin !== undefined).toBe(row.appendPin);
      expect(r.error !== undefined).toBe(row.state === "mismatch-error");
    });
  }

  it("decides the same facts the same way every time, each run with a pin of its own and its own mismatch message", () => {
    const first = resolveModePin({ ...base, configured: "lean" });
    const again = resolveModePin({ ...base, runId: "run-2", configured: "lean" });
    expect(again).toEqual(first);
    expect(again.pin).not.toBe(first.pin);
    const other = resolveModePin({ ...base, loopId: "billing", configured: "lean" });
    expect(other.pin?.decisionId).toBe("billing#toolCallLog");
    resolveModePin({ ...base, recorded: "lean", configured: "full" });
    expect(resolveModePin({ ...base, runId: "run-3", recorded: "lean", configured: "full" }).error?.message).toMatch(
      /^run run-3 /,
    );
  });

  it("a resume with the option unset follows the recorded lean pin", () => {
    expect(resolveModePin({ ...base, recorded: "lean" })).toEqual({
      state: "pinned-lean",
      mode: "lean",
      appendPin: false,
    });
  });

  it("names the run, the loop, both values and the fix in the mismatch error", () => {
    const { error } = resolveModePin({ ...base, recorded: "lean", configured: "full" });
    expect(isAgentLoopConfigError(error)).toBe(true);
    expect(error?.code).toBe("toolCallLogMismatch");
    expect(error?.message).toMatch(
      /^run run-1 \(loop support\) recorded toolCallLog "lean" but is configured "full"; /,
    );
    expect(error?.message).toContain('configure toolCallLog "lean"');
  });

  it("takes no late pin on a completed run: full (its recorded shape) passes, lean is a mismatch", () => {
    const done = { ...base, runCompleted: true };
    expect(resolveModePin({ ...done, configured: "full" })).toEqual({ state: "unset", mode: "full", appendPin: false });
    expect(resolveModePin({ ...done })).toEqual({ state: "unset", mode: "full", appendPin: false });
    const lean = resolveModePin({ ...done, configured: "lean" });
    expect(lean).toMatchObject({ state: "mismatch-error", mode: "full", appendPin: false });
    expect(lean.error?.message).toContain('recorded toolCallLog "full" (no pin: the default shape of a completed run)');
    expect(lean.error?.message).toContain("takes no late pin");
  });

  it("a completed pinned run is read in its pinned shape, and refuses the other one", () => {
    const done = { ...base, runCompleted: true, recorded: "lean" } as const;
    expect(resolveModePin(done)).toEqual({ state: "pinned-lean", mode: "lean", appendPin: false });
    expect(resolveModePin({ ...done, configured: "full" }).state).toBe("mismatch-error");
  });

  it("returns the late pin to journal: the decision <loop>#toolCallLog from source agent-tool-call-log", () => {
    expect(resolveModePin({ ...base, configured: "full" }).pin).toEqual({
      decisionId: "support#toolCallLog",
      source: "agent-tool-call-log",
      choice: { mode: "full" },
    });
  });
});

describe("validateToolCallLogMode", () => {
  it.each([undefined, "full", "lean"])("accepts %s", (value) => {
    expect(validateToolCallLogMode(value, "support")).toBe(value);
  });

  it.each([
    ["a string", "compact", '"compact"'],
    ["the wrong case", "Lean", '"Lean"'],
    ["null", null, "null"],
    ["a boolean", true, "true"],
    ["a number", 0, "0"],
    ["an object", { mode: "lean" }, '{"mode":"lean"}'],
    ["a bigint", 1n, "1n"],
    ["a function", () => "lean", "a function"],
  ])("throws AgentLoopConfigError for %s, naming the loop, the value and the allowed values", (_, value, shown) => {
    let caught: unknown;
    try {
      validateToolCallLogMode(value, "support");
    } catch (e) {
      caught = e;
    }
    expect(isAgentLoopConfigError(caught)).toBe(true);
    const error = caught as Error & { code: string };
    expect(error.code).toBe("invalidToolCallLog");
    expect(error.message).toContain("loop support");
    expect(error.message).toContain(`toolCallLog is ${shown}`);
    expect(error.message).toContain('"full", "lean" or unset');
  });

  it("resolveModePin throws on an invalid value before stepping the machine", () => {
    expect(() =>
      resolveModePin({ loopId: "support", runId: "run-1", configured: "LEAN", runCompleted: false }),
    ).toThrow(/toolCallLog is "LEAN"/);
  });
});

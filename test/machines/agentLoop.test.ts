import { describe, expect, it } from "vitest";
import {
  type AnyEventObject,
  type AnyTransitionDefinition,
  initialTransition,
  type SnapshotFrom,
  transition,
} from "xstate";
import { adjacencyMapToArray, getAdjacencyMap, getShortestPaths } from "xstate/graph";
import { toolStepId } from "../../src/events/ids.ts";
import type { ModelResponse } from "../../src/events/types.ts";
import {
  type AgentLoopEvent,
  type AgentLoopInput,
  agentLoopMachine,
  type CallModelOutput,
  type PrepareOutput,
} from "../../src/machines/agentLoop.machine.ts";
import { JOURNAL_CHART_STATES } from "../../src/machines/chartState.ts";
import type { ToolCallParentEvent } from "../../src/machines/toolCall.machine.ts";
import { activeIds, definedStates, definedTransitions, walk } from "../support/machineCoverage.ts";

const machine = agentLoopMachine;
type Snapshot = SnapshotFrom<typeof machine>;
const input: AgentLoopInput = { runId: "run-1", loopId: "support", maxIterations: 2 };

const twoCalls: ModelResponse = {
  toolCalls: [
    { id: "a", name: "lookup", input: { order: 7 } },
    { id: "b", name: "refund", input: { order: 7 } },
  ],
};
const answer: ModelResponse = { content: "Your order ships today.", toolCalls: [] };
const step0 = toolStepId(input.loopId, 0, 0);
const step1 = toolStepId(input.loopId, 0, 1);

const done = (id: string, output: unknown) => ({ type: `xstate.done.actor.${id}`, output });
/** What the modelCalls actor reports of the turn's model call. */
const model = (output: CallModelOutput) => ({ type: "MODEL.DONE", output }) as const;
const error = (id: string, e: unknown) => ({ type: `xstate.error.actor.${id}`, error: e });

const EVENTS = {
  "prepare ready": done("prepare", { kind: "ready" } satisfies PrepareOutput),
  "prepare completed": done("prepare", { kind: "completed" } satisfies PrepareOutput),
  "prepare throws": error("prepare", "divergence"),
  // The journal ends the run already: it ends so again, appending nothing.
  "prepare cancelled": done("prepare", { kind: "cancelled", reason: "operator stop" } satisfies PrepareOutput),
  "prepare failed": done("prepare", { kind: "failed", error: "failed earlier" } satisfies PrepareOutput),
  // Both calls can wait (an approval, a retry): each gets a toolCall chart, which reports with CALL.*.
  "model calls 2 tools": model({
    ok: true,
    response: twoCalls,
    charted: [0, 1],
  }),
  // Neither can wait: both go to the plainCalls actor, which reports each with CALL.* as a chart does.
  "model calls 2 plain tools": model({ ok: true, response: twoCalls }),
  "model answers": model({ ok: true, response: answer }),
  "model served, its calls settled": model({
    ok: true,
    response: twoCalls,
    settled: true,
  }),
  "model fails": model({
    ok: false,
    reason: "model-error",
    detail: { message: "rate limited" },
  }),
  "model fails, retried": model({
    ok: false,
    retry: { attempt: 1, delayMs: 1000 },
  }),
  "model past the deadline": model({
    ok: false,
    reason: "deadline",
    detail: { deadlineAt: "2026-12-03T12:00:00.000Z" },
  }),
  "backoff elapsed": { type: "xstate.after.backoff.agentLoop.running.backingOff" },
  "model call throws": { type: "MODEL.FAILED", error: "append failed" },
  "CALL.SETTLED 0": { type: "CALL.SETTLED", index: 0, status: "ok" },
  "CALL.SETTLED 1": { type: "CALL.SETTLED", index: 1, status: "error" },
  "CALL.PENDING 0": { type: "CALL.PENDING", index: 0, stepId: step0 },
  "CALL.PENDING 1": { type: "CALL.PENDING", index: 1, stepId: step1 },
  "CALL.WAITING 0": { type: "CALL.WAITING", index: 0, stepId: step0 },
  "CALL.WAITING 1": { type: "CALL.WAITING", index: 1, stepId: step1 },
  "CALL.FAILED 1": { type: "CALL.FAILED", index: 1, error: "append failed" },
  // The actor that runs the calls that cannot wait failed itself (a call's failure is its CALL.FAILED).
  "plainCalls throws": error("plainCalls", "lost"),
  // The actor that makes the model calls failed itself (a call's failure is its MODEL.FAILED).
  "modelCalls throws": error("modelCalls", "gone"),
  // A toolCall chart's final state: it reported with CALL.* already, so the loop ignores this one.
  "toolCall 0 done": done("call:0", undefined),
  ABORT: { type: "ABORT", reason: "user pressed stop" },
  // Control noticed a cancel request (cancelRun); the fence found the run taken over.
  CANCEL: { type: "CANCEL", reason: "operator stop" },
  LOST: { type: "LOST", error: "taken over" },
  // The one actor that journals the run's ending, in every ending state.
  "end done": done("end", undefined),
  "end throws": error("end", "append failed"),
} as const satisfies Record<string, AnyEventObject | ToolCallParentEvent>;
type EventName = keyof typeof EVENTS;

// xstate makes the done and error events of invoked actors; AgentLoopEvent lists only the others.
const asEvent = (event: AnyEventObject) => event as unknown as AgentLoopEvent;
const step = (snapshot: Snapshot, name: EventName) => transition(machine, snapshot, asEvent(EVENTS[name]));

const toCallingModel = ["prepare ready"] as const satisfies readonly EventName[];
const toDispatching = [...toCallingModel, "model calls 2 tools"] as const satisfies readonly EventName[];

/** The snapshots the loop can rest in, each reached from the initial one by these events. */
const START = {
  starting: [],
  callingModel: toCallingModel,
  backingOff: [...toCallingModel, "model fails, retried"],
  "dispatching, 2 open": toDispatching,
  "dispatching, 1 open": [...toDispatching, "CALL.SETTLED 0"],
  "dispatching 2 plain calls": [...toCallingModel, "model calls 2 plain tools"],
  "dispatching 2 plain calls, 1 open": [...toCallingModel, "model calls 2 plain tools", "CALL.SETTLED 0"],
  "dispatching, 1 open, 1 pending": [...toDispatching, "CALL.PENDING 0"],
  "dispatching, 1 open, 1 waiting": [...toDispatching, "CALL.WAITING 0"],
  "dispatching the last turn, 1 open": [
    ...toDispatching,
    "CALL.SETTLED 0",
    "CALL.SETTLED 1",
    "model calls 2 tools",
    "CALL.SETTLED 0",
  ],
  finishing: [...toCallingModel, "model answers"],
  "finishing, cancel noted": [...toCallingModel, "model answers", "CANCEL"],
  interrupting: [...toCallingModel, "ABORT"],
  "interrupting, cancel noted": [...toCallingModel, "ABORT", "CANCEL"],
  "starting, cancel noted": ["CANCEL"],
  cancelling: [...toCallingModel, "CANCEL"],
  failing: ["prepare throws"],
  completed: ["prepare completed"],
  interrupted: [...toCallingModel, "ABORT", "end done"],
  cancelled: [...toCallingModel, "CANCEL", "end done"],
  failed: ["prepare throws", "end done"],
  lost: [...toCallingModel, "LOST"],
} as const satisfies Record<string, readonly EventName[]>;
type Start = keyof typeof START;

function reach(events: readonly EventName[]): Snapshot {
  let [snapshot] = initialTransition(machine, input);
  for (const name of events) [snapshot] = step(snapshot, name);
  return snapshot;
}

/** A snapshot's value as a dotted path: `running.dispatching`. */
const stateOf = (snapshot: Snapshot) =>
  typeof snapshot.value === "string"
    ? snapshot.value
    : Object.entries(snapshot.value)
        .map(([parent, child]) => `${parent}.${child}`)
        .join();

/** What a returned action does, in one word and an id: `spawn call:0`, `stop call:0`, `tell modelCalls MODEL.CALL`. */
function effects(actions: readonly { type: string; params?: unknown }[]): string[] {
  return actions.map((a) => {
    const id = (a.params as { id?: string } | undefined)?.id;
    if (a.type === "xstate.spawnChild") return `spawn ${id}`;
    if (a.type === "xstate.stopChild") return `stop ${id}`;
    if (a.type === "xstate.raise") return `wait ${(a.params as { delay?: number }).delay}`;
    if (a.type === "xstate.sendTo") {
      const { targetId, event } = a.params as { targetId: string; event: { type: string } };
      return `tell ${targetId} ${event.type}`;
    }
    if (a.type === "xstate.cancel") return "cancel wait";
    return a.type;
  });
}

const STOP_CALLS = ["stop call:0", "stop call:1"];
/** Leaving `running` stops the actors that make the model calls and run the calls that cannot wait. */
const LEAVE = ["stop modelCalls", "stop plainCalls"];
/** The model is called for the turn: the modelCalls actor is told. */
const CALL_MODEL = "tell modelCalls MODEL.CALL";
/** Leaving a batch of plain calls early stops those still open. */
const STOP_PLAIN = "tell plainCalls CALLS.STOP";

/** Two calls open: each settling, pending or failing counts down; an abort stops both. */
const TWO_OPEN = {
  "CALL.SETTLED 0": ["running.dispatching"],
  "CALL.SETTLED 1": ["running.dispatching"],
  "CALL.PENDING 0": ["running.dispatching"],
  "CALL.PENDING 1": ["running.dispatching"],
  "CALL.WAITING 0": ["running.dispatching"],
  "CALL.WAITING 1": ["running.dispatching"],
  "CALL.FAILED 1": ["failing", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "plainCalls throws": ["failing", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "modelCalls throws": ["failing", ...STOP_CALLS, ...LEAVE, "spawn end"],
  ABORT: ["interrupting", ...STOP_CALLS, ...LEAVE, "spawn end"],
  CANCEL: ["cancelling", ...STOP_CALLS, ...LEAVE, "spawn end"],
  LOST: ["lost", ...STOP_CALLS, ...LEAVE],
} as const satisfies Partial<Record<EventName, readonly string[]>>;

/** The last call open (charted): it ends the turn, or the run when another call waits for approval. */
const LAST_OPEN_INTERRUPTS = {
  "CALL.SETTLED 1": ["interrupting", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "CALL.SETTLED 0": ["interrupting", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "CALL.PENDING 1": ["interrupting", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "CALL.PENDING 0": ["interrupting", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "CALL.WAITING 1": ["interrupting", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "CALL.WAITING 0": ["interrupting", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "CALL.FAILED 1": ["failing", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "plainCalls throws": ["failing", ...STOP_CALLS, ...LEAVE, "spawn end"],
  "modelCalls throws": ["failing", ...STOP_CALLS, ...LEAVE, "spawn end"],
  ABORT: ["interrupting", ...STOP_CALLS, ...LEAVE, "spawn end"],
  CANCEL: ["cancelling", ...STOP_CALLS, ...LEAVE, "spawn end"],
  LOST: ["lost", ...STOP_CALLS, ...LEAVE],
} as const satisfies Partial<Record<EventName, readonly string[]>>;

/** A cancel noted while the run could not stop: the ending it was journaling ends in cancelling instead. */
const CANCEL_NOTED = {
  "end done": ["cancelling", "stop end", "spawn end"],
  "end throws": ["cancelling", "stop end", "spawn end"],
  CANCEL: ["interrupting"],
  LOST: ["lost", "stop end"],
} as const satisfies Partial<Record<EventName, readonly string[]>>;

/** `[next state, ...effects]`; an event missing from a row is ignored: same snapshot, no actions. */
const TABLE: Record<Start, Partial<Record<EventName, readonly string[]>>> = {
  starting: {
    "prepare ready": ["running.callingModel", "stop prepare", "spawn modelCalls", "spawn plainCalls", CALL_MODEL],
    "prepare completed": ["completed", "stop prepare"],
    "prepare cancelled": ["cancelled", "stop prepare"],
    "prepare failed": ["failed", "stop prepare"],
    "prepare throws": ["failing", "stop prepare", "spawn end"],
    // Noted: the run is not walking yet (prepare decides whether there is a run to cancel).
    CANCEL: ["starting"],
    LOST: ["lost", "stop prepare"],
  },
  "starting, cancel noted": {
    "prepare ready": ["cancelling", "stop prepare", "spawn end"],
    "prepare completed": ["completed", "stop prepare"],
    "prepare cancelled": ["cancelled", "stop prepare"],
    "prepare failed": ["failed", "stop prepare"],
    "prepare throws": ["cancelling", "stop prepare", "spawn end"],
    CANCEL: ["starting"],
    LOST: ["lost", "stop prepare"],
  },
  callingModel: {
    "model calls 2 tools": ["running.dispatching", "spawn call:0", "spawn call:1"],
    "model calls 2 plain tools": ["running.dispatching", "tell plainCalls CALLS.RUN"],
    "model answers": ["finishing", ...LEAVE, "spawn end"],
    "model served, its calls settled": ["running.callingModel", CALL_MODEL],
    "model fails": ["interrupting", ...LEAVE, "spawn end"],
    "model fails, retried": ["running.backingOff", "wait 1000"],
    "model past the deadline": ["interrupting", ...LEAVE, "spawn end"],
    "model call throws": ["failing", ...LEAVE, "spawn end"],
    "plainCalls throws": ["failing", ...LEAVE, "spawn end"],
    "modelCalls throws": ["failing", ...LEAVE, "spawn end"],
    ABORT: ["interrupting", ...LEAVE, "spawn end"],
    CANCEL: ["cancelling", ...LEAVE, "spawn end"],
    LOST: ["lost", ...LEAVE],
  },
  backingOff: {
    "backoff elapsed": ["running.callingModel", "cancel wait", CALL_MODEL],
    "plainCalls throws": ["failing", "cancel wait", ...LEAVE, "spawn end"],
    "modelCalls throws": ["failing", "cancel wait", ...LEAVE, "spawn end"],
    ABORT: ["interrupting", "cancel wait", ...LEAVE, "spawn end"],
    CANCEL: ["cancelling", "cancel wait", ...LEAVE, "spawn end"],
    LOST: ["lost", "cancel wait", ...LEAVE],
  },
  "dispatching, 2 open": TWO_OPEN,
  // Plain calls report as charted ones do; leaving the batch early tells the plainCalls actor to stop them.
  "dispatching 2 plain calls": {
    "CALL.SETTLED 0": ["running.dispatching"],
    "CALL.SETTLED 1": ["running.dispatching"],
    "CALL.PENDING 0": ["running.dispatching"],
    "CALL.PENDING 1": ["running.dispatching"],
    "CALL.WAITING 0": ["running.dispatching"],
    "CALL.WAITING 1": ["running.dispatching"],
    "CALL.FAILED 1": ["failing", STOP_PLAIN, ...LEAVE, "spawn end"],
    "plainCalls throws": ["failing", STOP_PLAIN, ...LEAVE, "spawn end"],
    "modelCalls throws": ["failing", STOP_PLAIN, ...LEAVE, "spawn end"],
    ABORT: ["interrupting", STOP_PLAIN, ...LEAVE, "spawn end"],
    CANCEL: ["cancelling", STOP_PLAIN, ...LEAVE, "spawn end"],
    LOST: ["lost", STOP_PLAIN, ...LEAVE],
  },
  // The last plain call ending leaves nothing to stop: on to the next turn.
  "dispatching 2 plain calls, 1 open": {
    "CALL.SETTLED 1": ["running.callingModel", CALL_MODEL],
    "CALL.SETTLED 0": ["running.callingModel", CALL_MODEL],
    "CALL.PENDING 1": ["interrupting", ...LEAVE, "spawn end"],
    "CALL.PENDING 0": ["interrupting", ...LEAVE, "spawn end"],
    "CALL.WAITING 1": ["interrupting", ...LEAVE, "spawn end"],
    "CALL.WAITING 0": ["interrupting", ...LEAVE, "spawn end"],
    "CALL.FAILED 1": ["failing", STOP_PLAIN, ...LEAVE, "spawn end"],
    "plainCalls throws": ["failing", STOP_PLAIN, ...LEAVE, "spawn end"],
    "modelCalls throws": ["failing", STOP_PLAIN, ...LEAVE, "spawn end"],
    ABORT: ["interrupting", STOP_PLAIN, ...LEAVE, "spawn end"],
    CANCEL: ["cancelling", STOP_PLAIN, ...LEAVE, "spawn end"],
    LOST: ["lost", STOP_PLAIN, ...LEAVE],
  },
  "dispatching, 1 open": {
    ...LAST_OPEN_INTERRUPTS,
    "CALL.SETTLED 1": ["running.callingModel", ...STOP_CALLS, CALL_MODEL],
    "CALL.SETTLED 0": ["running.callingModel", ...STOP_CALLS, CALL_MODEL],
  },
  "dispatching, 1 open, 1 pending": LAST_OPEN_INTERRUPTS,
  "dispatching, 1 open, 1 waiting": LAST_OPEN_INTERRUPTS,
  "dispatching the last turn, 1 open": LAST_OPEN_INTERRUPTS,
  // The run's ending is journaled by the one end actor; a cancel is noted meanwhile, the fence's loss ends it at once.
  finishing: {
    "end done": ["completed", "stop end"],
    "end throws": ["failing", "stop end", "spawn end"],
    CANCEL: ["finishing"],
    LOST: ["lost", "stop end"],
  },
  // The answer journaled wins over a cancel that came meanwhile; a refused answer ends cancelled.
  "finishing, cancel noted": { ...CANCEL_NOTED, "end done": ["completed", "stop end"], CANCEL: ["finishing"] },
  interrupting: {
    "end done": ["interrupted", "stop end"],
    "end throws": ["failing", "stop end", "spawn end"],
    CANCEL: ["interrupting"],
    LOST: ["lost", "stop end"],
  },
  "interrupting, cancel noted": CANCEL_NOTED,
  cancelling: {
    "end done": ["cancelled", "stop end"],
    "end throws": ["failing", "stop end", "spawn end"],
    LOST: ["lost", "stop end"],
  },
  // The first error is the run's: failing to journal it still ends the run failed, with that error.
  failing: {
    "end done": ["failed", "stop end"],
    "end throws": ["failed", "stop end"],
    LOST: ["lost", "stop end"],
  },
  completed: {},
  interrupted: {},
  cancelled: {},
  failed: {},
  lost: {},
};

describe("agentLoopMachine transitions (pure)", () => {
  it("starts in starting, asking prepare to fold the journal of the run", () => {
    const [snapshot, actions] = initialTransition(machine, input);
    expect(snapshot.value).toBe("starting");
    expect(snapshot.context).toEqual({
      ...input,
      callBatch: 128,
      turn: 0,
      response: undefined,
      open: 0,
      batchStart: 0,
      dispatched: 0,
      pending: [],
      waiting: [],
      interrupt: undefined,
      error: undefined,
      cancel: undefined,
      lost: undefined,
    });
    expect(effects(actions)).toEqual(["spawn prepare"]);
    expect(actions[0]?.params).toMatchObject({ src: "prepare", input: { runId: "run-1" } });
  });

  for (const [start, row] of Object.entries(TABLE) as [Start, (typeof TABLE)[Start]][]) {
    for (const [name, expected] of Object.entries(row) as [EventName, readonly string[]][]) {
      const [state, ...actions] = expected;
      it(`${start} --${name}--> ${state}${actions.length ? ` (${actions.join(", ")})` : ""}`, () => {
        const [next, returned] = step(reach(START[start]), name);
        expect(stateOf(next)).toBe(state);
        expect(effects(returned)).toEqual(actions);
      });
    }
    // An error from an actor the loop is not running cannot arrive (only the current state's actor runs).
    const ignored = (Object.keys(EVENTS) as EventName[]).filter(
      (name) => !(name in row) && !EVENTS[name].type.startsWith("xstate.error."),
    );
    it(`${start} ignores the ${ignored.length} other events it has no transition for`, () => {
      const snapshot = reach(START[start]);
      for (const name of ignored) {
        const [next, returned] = step(snapshot, name);
        expect(next, name).toBe(snapshot);
        expect(returned, name).toEqual([]);
      }
    });
  }

  it("ignores ABORT before running and while finishing or interrupting (the model call checks the signal itself)", () => {
    for (const start of ["starting", "finishing", "interrupting"] as const) {
      const snapshot = reach(START[start]);
      expect(step(snapshot, "ABORT"), start).toEqual([snapshot, []]);
    }
  });
});

describe("agentLoopMachine context and actor inputs (pure)", () => {
  it("walks a run from turn 0 once prepared: a resumed run's recorded steps are served by the same actors", () => {
    const [next, actions] = step(reach([]), "prepare ready");
    expect(next.context.turn).toBe(0);
    expect(actions.at(-1)?.params).toMatchObject({ targetId: "modelCalls", event: { type: "MODEL.CALL", turn: 0 } });
  });

  it("goes on to the next turn when a served response's calls are all settled in the journal: no child is spawned", () => {
    const [next, actions] = step(reach(START.callingModel), "model served, its calls settled");
    expect(next.context).toMatchObject({ turn: 1, response: undefined, open: 0 });
    expect(effects(actions)).toEqual([CALL_MODEL]);
    expect(actions.at(-1)?.params).toMatchObject({ targetId: "modelCalls", event: { type: "MODEL.CALL", turn: 1 } });
  });

  it("dispatches a response: one toolCall child a call, with its step id", () => {
    const [next, actions] = step(reach(START.callingModel), "model calls 2 tools");
    expect(next.context).toMatchObject({ turn: 0, response: twoCalls, open: 2, pending: [] });
    const spawned = actions.filter((a) => a.type === "xstate.spawnChild").map((a) => a.params);
    expect(spawned).toMatchObject([
      {
        id: "call:0",
        src: "toolCall",
        input: { runId: "run-1", turn: 0, index: 0, stepId: step0, call: twoCalls.toolCalls[0] },
      },
      {
        id: "call:1",
        src: "toolCall",
        input: { runId: "run-1", turn: 0, index: 1, stepId: step1, call: twoCalls.toolCalls[1] },
      },
    ]);
    expect(Object.keys(next.children).sort()).toEqual(["call:0", "call:1", "modelCalls", "plainCalls"]);
  });

  it("dispatches a call that can wait as a toolCall chart and tells the plainCalls actor to run one that cannot", () => {
    const mixed = model({ ok: true, response: twoCalls, charted: [1] });
    const [next, actions] = transition(machine, reach(START.callingModel), asEvent(mixed));
    expect(next.context.charted).toEqual([1]);
    const spawned = actions.filter((a) => a.type === "xstate.spawnChild").map((a) => a.params);
    expect(spawned).toMatchObject([
      { id: "call:1", src: "toolCall", input: { turn: 0, index: 1, stepId: step1, call: twoCalls.toolCalls[1] } },
    ]);
    const told = actions.filter((a) => a.type === "xstate.sendTo").map((a) => a.params);
    expect(told).toMatchObject([
      {
        targetId: "plainCalls",
        event: { type: "CALLS.RUN", calls: [{ turn: 0, index: 0, stepId: step0, call: twoCalls.toolCalls[0] }] },
      },
    ]);
    expect(Object.keys(next.children).sort()).toEqual(["call:1", "modelCalls", "plainCalls"]);
  });

  it("finds each charted call of a larger response (the indices are searched, not scanned)", () => {
    const five: ModelResponse = {
      toolCalls: Array.from({ length: 5 }, (_, i) => ({ id: `c${i}`, name: "lookup", input: { i } })),
    };
    for (const charted of [[], [0], [4], [1, 3, 4], [0, 1, 2, 3, 4]]) {
      const event = model({ ok: true, response: five, charted });
      const [, actions] = transition(machine, reach(START.callingModel), asEvent(event));
      const where = new Map<number, string>();
      for (const a of actions) {
        const params = a.params as { src?: string; input?: { index: number }; event?: { calls?: { index: number }[] } };
        if (a.type === "xstate.spawnChild" && params.input) where.set(params.input.index, params.src ?? "");
        if (a.type === "xstate.sendTo")
          for (const call of params.event?.calls ?? []) where.set(call.index, "plainCalls");
      }
      expect(
        [...where].sort(([a], [b]) => a - b).map(([, src]) => src),
        JSON.stringify(charted),
      ).toEqual([0, 1, 2, 3, 4].map((i) => (charted.includes(i) ? "toolCall" : "plainCalls")));
    }
  });

  it("counts a plain call down when it reports, ignores a toolCall chart's own done event, and fails on a reported failure", () => {
    expect(reach([...START["dispatching 2 plain calls"], "CALL.SETTLED 1"]).context.open).toBe(1);
    const charted = reach(START["dispatching, 2 open"]);
    expect(step(charted, "toolCall 0 done")).toEqual([charted, []]);
    const failed = reach([...START["dispatching 2 plain calls"], "CALL.FAILED 1"]);
    expect(failed.value).toBe("failing");
    expect(failed.context.error).toBe("append failed");
  });

  it("a plain call reported pending (a sub-agent waiting for an approval) leaves its step pending: the turn interrupts", () => {
    const [both, actions] = step(reach([...START["dispatching 2 plain calls"], "CALL.PENDING 0"]), "CALL.SETTLED 1");
    expect(both.value).toBe("interrupting");
    expect(actions.find((a) => a.type === "xstate.spawnChild")?.params).toMatchObject({
      src: "end",
      input: { pending: [step0] },
    });
  });

  it("runs the calls that cannot wait in one actor for the whole run, and fails the run if that actor fails", () => {
    const running = reach(START.callingModel);
    expect(Object.keys(running.children).sort()).toEqual(["modelCalls", "plainCalls"]);
    expect(Object.keys(reach(START["dispatching 2 plain calls"]).children).sort()).toEqual([
      "modelCalls",
      "plainCalls",
    ]); // no child a call or a turn
    const failed = reach([...START["dispatching 2 plain calls"], "plainCalls throws"]);
    expect(failed.value).toBe("failing");
    expect(failed.context.error).toBe("lost");
  });

  it("completes an answer without content with an empty string", () => {
    const [, actions] = step(reach(START.callingModel), "model answers");
    expect(actions.at(-1)?.params).toMatchObject({ input: { turn: 0, content: "Your order ships today." } });
    const bare = model({ ok: true, response: { toolCalls: [] } });
    const [, bareActions] = transition(machine, reach(START.callingModel), asEvent(bare));
    expect(bareActions.at(-1)?.params).toMatchObject({ src: "end", input: { turn: 0, content: "" } });
  });

  it("keeps the model's response and opens one call per tool call", () => {
    const next = reach(START["dispatching, 2 open"]);
    expect(next.context).toMatchObject({ turn: 0, response: twoCalls, open: 2, pending: [] });
  });

  it("counts a settled call down, and a pending one down and into pending", () => {
    expect(reach([...toDispatching, "CALL.SETTLED 1"]).context).toMatchObject({ open: 1, pending: [] });
    expect(reach([...toDispatching, "CALL.PENDING 1"]).context).toMatchObject({ open: 1, pending: [step1] });
  });

  it("starts the next turn when every call settled: turn + 1, response, open and pending cleared", () => {
    const [next, actions] = step(reach(START["dispatching, 1 open"]), "CALL.SETTLED 1");
    expect(next.context).toMatchObject({ turn: 1, response: undefined, open: 0, pending: [], interrupt: undefined });
    expect(next.context.charted).toBeUndefined();
    expect(actions.at(-1)?.params).toMatchObject({ targetId: "modelCalls", event: { type: "MODEL.CALL", turn: 1 } });
  });

  it("interrupts with max-iterations when the turn reaches maxIterations", () => {
    const [next, actions] = step(reach(START["dispatching the last turn, 1 open"]), "CALL.SETTLED 1");
    expect(next.context.turn).toBe(2);
    expect(next.context.interrupt).toEqual({ reason: "max-iterations", detail: { maxIterations: 2 } });
    expect(actions.at(-1)?.params).toMatchObject({
      src: "end",
      input: { turn: 2, reason: "max-iterations", detail: { maxIterations: 2 }, pending: [] },
    });
  });

  it("never calls the model with maxIterations 0", () => {
    const [snapshot] = initialTransition(machine, { ...input, maxIterations: 0 });
    const [next, actions] = transition(machine, snapshot, asEvent(EVENTS["prepare ready"]));
    expect(next.value).toBe("interrupting");
    expect(effects(actions)).not.toContain(CALL_MODEL);
  });

  it("interrupts with approval-pending, naming the pending step ids, once no call is open", () => {
    const [next, actions] = step(reach(START["dispatching, 1 open, 1 pending"]), "CALL.SETTLED 1");
    expect(next.context.interrupt).toEqual({ reason: "approval-pending", detail: { stepIds: [step0] } });
    expect(actions.at(-1)?.params).toMatchObject({
      src: "end",
      input: { turn: 0, reason: "approval-pending", detail: { stepIds: [step0] }, pending: [step0] },
    });
    const [both] = step(reach(START["dispatching, 1 open, 1 pending"]), "CALL.PENDING 1");
    expect(both.context.interrupt?.detail).toEqual({ stepIds: [step0, step1] });
  });

  it("interrupts with waiting, naming the waiting step ids, once no call is open", () => {
    const [next, actions] = step(reach(START["dispatching, 1 open, 1 waiting"]), "CALL.SETTLED 1");
    expect(next.context.interrupt).toEqual({ reason: "waiting", detail: { stepIds: [step0] } });
    expect(actions.at(-1)?.params).toMatchObject({
      src: "end",
      input: {
        kind: "interrupted",
        turn: 0,
        reason: "waiting",
        detail: { stepIds: [step0] },
        pending: [],
        waiting: [step0],
      },
    });
    const [both] = step(reach(START["dispatching, 1 open, 1 waiting"]), "CALL.WAITING 1");
    expect(both.context.interrupt?.detail).toEqual({ stepIds: [step0, step1] });
  });

  it("picks approval-pending over waiting when calls of a turn do both", () => {
    const [next, actions] = step(reach(START["dispatching, 1 open, 1 waiting"]), "CALL.PENDING 1");
    expect(next.context.interrupt).toEqual({ reason: "approval-pending", detail: { stepIds: [step1] } });
    expect(actions.at(-1)?.params).toMatchObject({
      src: "end",
      input: { kind: "interrupted", reason: "approval-pending", pending: [step1], waiting: [step0] },
    });
  });

  it("waits for the open calls before interrupting for a wait", () => {
    const next = reach([...toDispatching, "CALL.WAITING 0"]);
    expect(stateOf(next)).toBe("running.dispatching");
    expect(next.context).toMatchObject({ open: 1, waiting: [step0], interrupt: undefined });
  });

  it("waits for the open calls before interrupting for a pending approval", () => {
    const next = reach([...toDispatching, "CALL.PENDING 0"]);
    expect(stateOf(next)).toBe("running.dispatching");
    expect(next.context.interrupt).toBeUndefined();
  });

  it("interrupts with aborted on ABORT, its reason as the detail", () => {
    const [next, actions] = step(reach(START["dispatching, 2 open"]), "ABORT");
    expect(next.context.interrupt).toEqual({ reason: "aborted", detail: "user pressed stop" });
    expect(actions.at(-1)?.params).toMatchObject({ input: { reason: "aborted", detail: "user pressed stop" } });
    const [bare] = transition(machine, reach(START.callingModel), { type: "ABORT" });
    expect(bare.context.interrupt).toEqual({ reason: "aborted", detail: null });
  });

  it("interrupts with the reason of a model call that failed (model-error)", () => {
    const [next, actions] = step(reach(START.callingModel), "model fails");
    expect(next.context.interrupt).toEqual({ reason: "model-error", detail: { message: "rate limited" } });
    expect(actions.at(-1)?.params).toMatchObject({ src: "end", input: { reason: "model-error" } });
  });

  it("waits in backingOff the delay the model call computed, then calls the model again for the same turn", () => {
    const waiting = reach(START.backingOff);
    expect(stateOf(waiting)).toBe("running.backingOff");
    expect(waiting.context.backoff).toEqual({ attempt: 1, delayMs: 1000 });
    expect(waiting.context.interrupt).toBeUndefined();
    const [again, actions] = step(waiting, "backoff elapsed");
    expect(again.context.backoff).toBeUndefined();
    expect(actions.at(-1)?.params).toMatchObject({ targetId: "modelCalls", event: { type: "MODEL.CALL", turn: 0 } });
  });

  it("interrupts an abort during the back-off with aborted (the journaled retryAt says when to go on)", () => {
    const [next] = step(reach(START.backingOff), "ABORT");
    expect(next.context.interrupt).toEqual({ reason: "aborted", detail: "user pressed stop" });
  });

  it("interrupts with deadline when the model call finds the run's deadline passed", () => {
    const [next, actions] = step(reach(START.callingModel), "model past the deadline");
    expect(next.context.interrupt).toEqual({ reason: "deadline", detail: { deadlineAt: "2026-12-03T12:00:00.000Z" } });
    expect(actions.at(-1)?.params).toMatchObject({ src: "end", input: { reason: "deadline" } });
  });

  it("interrupts with budget when the model call finds a limit reached, its figures handed to the one end actor", () => {
    const breach = { limit: "modelCalls", used: { modelCalls: 2, inputTokens: 0, outputTokens: 0, cost: 0 } };
    const [next, actions] = transition(
      machine,
      reach(START.callingModel),
      asEvent(model({ ok: false, reason: "budget", detail: breach })),
    );
    expect(stateOf(next)).toBe("interrupting");
    expect(next.context.interrupt).toEqual({ reason: "budget", detail: breach });
    expect(actions.at(-1)?.params).toMatchObject({
      src: "end",
      input: { kind: "interrupted", reason: "budget", detail: breach, turn: 0 },
    });
  });

  it("stops the calls of the turn it leaves, and no longer has them as children", () => {
    const [next] = step(reach(START["dispatching, 2 open"]), "ABORT");
    expect(Object.keys(next.children)).toEqual(["end"]);
  });

  it("dispatches a large response in batches: the next batch once every call of the current one ended", () => {
    const batched = (events: readonly EventName[]) => {
      let [snapshot] = initialTransition(machine, { ...input, callBatch: 1 });
      let actions: ReturnType<typeof step>[1] = [];
      for (const name of events) [snapshot, actions] = step(snapshot, name);
      return { snapshot, actions };
    };
    const first = batched(toDispatching);
    expect(effects(first.actions).filter((a) => a.includes("call:"))).toEqual(["spawn call:0"]);
    expect(first.snapshot.context).toMatchObject({ open: 1, batchStart: 0, dispatched: 1 });
    const second = batched([...toDispatching, "CALL.PENDING 0"]);
    expect(stateOf(second.snapshot)).toBe("running.dispatching");
    expect(effects(second.actions)).toEqual(["running.dispatching", "stop call:0", "spawn call:1"].slice(1));
    expect(second.snapshot.context).toMatchObject({ open: 1, batchStart: 1, dispatched: 2, pending: [step0] });
    expect(Object.keys(second.snapshot.children).sort()).toEqual(["call:1", "modelCalls", "plainCalls"]);
    const last = batched([...toDispatching, "CALL.PENDING 0", "CALL.SETTLED 1"]);
    expect(stateOf(last.snapshot)).toBe("interrupting");
    expect(last.snapshot.context.interrupt).toEqual({ reason: "approval-pending", detail: { stepIds: [step0] } });
  });

  it("keeps the error of a failed call or a rejected actor", () => {
    expect(reach([...toDispatching, "CALL.FAILED 1"]).context.error).toBe("append failed");
    expect(reach(["prepare throws"]).context.error).toBe("divergence");
    expect(reach([...toCallingModel, "model call throws"]).context.error).toBe("append failed");
    expect(reach([...toCallingModel, "modelCalls throws"]).context.error).toBe("gone");
    expect(reach([...START.finishing, "end throws"]).context.error).toBe("append failed");
    expect(reach([...START.interrupting, "end throws"]).context.error).toBe("append failed");
    // Journaling the failure failed too: the run's error stays the first one.
    expect(reach(["prepare throws", "end throws"]).context.error).toBe("divergence");
  });

  it("is done in completed, interrupted, cancelled, failed and lost, and only there", () => {
    for (const [start, events] of Object.entries(START)) {
      const final = ["completed", "interrupted", "cancelled", "failed", "lost"].includes(start);
      expect(reach(events).status, start).toBe(final ? "done" : "active");
    }
  });
});

describe("agentLoopMachine paths (xstate/graph)", () => {
  const events = Object.values(EVENTS).map(asEvent);
  // Batches of one call, so the paths also take the transition to a response's next batch.
  const options = { input: { ...input, callBatch: 1 }, events };

  it("reaches every state it can rest in by a shortest path, replayable with transition()", () => {
    const paths = getShortestPaths(machine, options);
    const reached = new Set(paths.map((p) => stateOf(p.state)));
    expect([...reached].sort()).toEqual([
      "cancelled",
      "cancelling",
      "completed",
      "failed",
      "failing",
      "finishing",
      "interrupted",
      "interrupting",
      "lost",
      "running.backingOff",
      "running.callingModel",
      "running.dispatching",
      "starting",
    ]);
    for (const path of paths) {
      let replayed = reach([]);
      for (const { event } of path.steps) [replayed] = transition(machine, replayed, event);
      expect(replayed.value).toEqual(path.state.value);
    }
  });

  it("holds every state chartStateOf reads from a journal on its paths, and only those it journals nothing in besides", () => {
    // Where the paths rest, and the states they pass through (deciding decides in passing).
    const reached = new Set(getShortestPaths(machine, options).map((p) => stateOf(p.state)));
    for (const edge of adjacencyMapToArray(getAdjacencyMap(machine, options))) {
      for (const id of walk(machine, edge.state, edge.event).visited) {
        const node = machine.getStateNodeById(id);
        if (Object.keys(node.states).length === 0) reached.add(id.replace(/^agentLoop\./, ""));
      }
    }
    for (const chart of JOURNAL_CHART_STATES) expect(reached, chart).toContain(chart);
    // The others: the chart journals the run's end in them (or, lost, stops without journaling).
    const unread = [...reached].filter((s) => !(JOURNAL_CHART_STATES as readonly string[]).includes(s)).sort();
    expect(unread).toEqual(["cancelling", "failing", "interrupting", "lost"]);
  });

  it("visits every state (deciding in passing) and takes every transition of the machine", () => {
    const defined = definedTransitions(machine);
    const taken = new Set<AnyTransitionDefinition>();
    const visited = new Set<string>(activeIds(machine, reach([])));
    const edges = adjacencyMapToArray(getAdjacencyMap(machine, options));
    for (const edge of edges) {
      const result = walk(machine, edge.state, edge.event);
      for (const t of result.taken) taken.add(t);
      for (const id of result.visited) visited.add(id);
    }
    expect([...visited].sort()).toEqual([...definedStates(machine)].sort());
    const label = (t: AnyTransitionDefinition) => defined.get(t) ?? `not defined: ${t.eventType}`;
    expect([...taken].map(label).sort()).toEqual([...defined.values()].sort());
    // starting 5 + 2 + CANCEL + LOST, running (ABORT, CANCEL, LOST, modelCalls and plainCalls errors) 5, deciding 2,
    // callingModel 6, backingOff 1, dispatching 5 + CALL.WAITING + 2, finishing 3 + CANCEL + LOST,
    // interrupting 4 + CANCEL + LOST, cancelling 2 + LOST, failing 2 + LOST
    expect(defined.size).toBe(48);
  });
});

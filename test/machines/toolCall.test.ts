import { describe, expect, it } from "vitest";
import {
  type AnyEventObject,
  type AnyTransitionDefinition,
  assign,
  createActor,
  fromPromise,
  initialTransition,
  type SnapshotFrom,
  setup,
  toPromise,
  transition,
} from "xstate";
import { adjacencyMapToArray, getAdjacencyMap, getShortestPaths } from "xstate/graph";
import {
  type ApprovalOutput,
  type CheckOutput,
  type ToolCallInput,
  type ToolCallParentEvent,
  toolCallMachine,
} from "../../src/machines/toolCall.machine.ts";
import { activeIds, definedStates, definedTransitions, walk } from "../support/machineCoverage.ts";

const input: ToolCallInput = {
  runId: "run-1",
  turn: 2,
  index: 1,
  stepId: "support#turn:2:tool:1",
  call: { id: "c1", name: "lookup", input: { order: 7 } },
};

// A pure transition() has no parent to send to, so the reports are stubbed here: they show up as
// named actions. What they send is checked on a real parent below.
const machine = toolCallMachine.provide({
  actions: { reportSettled: () => {}, reportPending: () => {}, reportWaiting: () => {}, reportFailed: () => {} },
});
type Snapshot = SnapshotFrom<typeof machine>;

const done = (id: string, output: unknown) => ({ type: `xstate.done.actor.${id}`, output });
const error = (id: string, e: unknown) => ({ type: `xstate.error.actor.${id}`, error: e });

const EVENTS = {
  "checkCall settled ok": done("checkCall", { kind: "settled", status: "ok" } satisfies CheckOutput),
  "checkCall settled error": done("checkCall", { kind: "settled", status: "error" } satisfies CheckOutput),
  "checkCall needs-approval": done("checkCall", { kind: "needs-approval" } satisfies CheckOutput),
  "checkCall run": done("checkCall", { kind: "run" } satisfies CheckOutput),
  "checkCall throws": error("checkCall", "journal unreadable"),
  "askApproval approved": done("askApproval", { kind: "approved" } satisfies ApprovalOutput),
  "askApproval declined": done("askApproval", { kind: "declined" } satisfies ApprovalOutput),
  "askApproval pending": done("askApproval", { kind: "pending" } satisfies ApprovalOutput),
  "askApproval throws": error("askApproval", "approve threw"),
  "runTool ok": done("runTool", { status: "ok" }),
  "runTool error": done("runTool", { status: "error" }),
  "runTool retry": done("runTool", { status: "retry", attempt: 1, delayMs: 250 }),
  "runTool pending": done("runTool", { status: "pending" }),
  "runTool waiting": done("runTool", { status: "waiting" }),
  "runTool throws": error("runTool", "append after close"),
  "backoff elapsed": { type: "xstate.after.backoff.toolCall.backingOff" },
} as const satisfies Record<string, AnyEventObject>;
type EventName = keyof typeof EVENTS;

const step = (snapshot: Snapshot, name: EventName) => transition(machine, snapshot, EVENTS[name] as AnyEventObject);

/** The snapshots a call can rest in, each reached from the initial one by these events. */
const START = {
  validating: [],
  awaitingApproval: ["checkCall needs-approval"],
  running: ["checkCall run"],
  backingOff: ["checkCall run", "runTool retry"],
  settled: ["checkCall settled ok"],
  pending: ["checkCall needs-approval", "askApproval pending"],
  waiting: ["checkCall run", "runTool waiting"],
  failed: ["checkCall throws"],
} as const satisfies Record<string, readonly EventName[]>;

function reach(events: readonly EventName[]): Snapshot {
  let [snapshot] = initialTransition(machine, input);
  for (const name of events) [snapshot] = step(snapshot, name);
  return snapshot;
}

/** What a returned action does, in one word and an id: `spawn runTool`, `stop checkCall`, `reportSettled`. */
function effects(actions: readonly { type: string; params?: unknown }[]): string[] {
  return actions.map((a) => {
    const id = (a.params as { id?: string } | undefined)?.id;
    if (a.type === "xstate.spawnChild") return `spawn ${id}`;
    if (a.type === "xstate.stopChild") return `stop ${id}`;
    if (a.type === "xstate.raise") return `wait ${(a.params as { delay?: number }).delay}`;
    if (a.type === "xstate.cancel") return "cancel wait";
    return a.type;
  });
}

/** `[next state, ...effects]`; an event missing from a row is ignored: same snapshot, no actions. */
const TABLE: Record<keyof typeof START, Partial<Record<EventName, readonly string[]>>> = {
  validating: {
    "checkCall settled ok": ["settled", "stop checkCall", "reportSettled"],
    "checkCall settled error": ["settled", "stop checkCall", "reportSettled"],
    "checkCall needs-approval": ["awaitingApproval", "stop checkCall", "spawn askApproval"],
    "checkCall run": ["running", "stop checkCall", "spawn runTool"],
    "checkCall throws": ["failed", "stop checkCall", "reportFailed"],
  },
  awaitingApproval: {
    "askApproval approved": ["running", "stop askApproval", "spawn runTool"],
    "askApproval declined": ["settled", "stop askApproval", "reportSettled"],
    "askApproval pending": ["pending", "stop askApproval", "reportPending"],
    "askApproval throws": ["failed", "stop askApproval", "reportFailed"],
  },
  running: {
    "runTool ok": ["settled", "stop runTool", "reportSettled"],
    "runTool error": ["settled", "stop runTool", "reportSettled"],
    "runTool retry": ["backingOff", "stop runTool", "wait 250"],
    "runTool pending": ["pending", "stop runTool", "reportPending"],
    "runTool waiting": ["waiting", "stop runTool", "reportWaiting"],
    "runTool throws": ["failed", "stop runTool", "reportFailed"],
  },
  backingOff: {
    "backoff elapsed": ["running", "cancel wait", "spawn runTool"],
  },
  settled: {},
  pending: {},
  waiting: {},
  failed: {},
};

describe("toolCallMachine transitions (pure)", () => {
  it("starts validating, asking checkCall about the call with the whole input", () => {
    const [snapshot, actions] = initialTransition(machine, input);
    expect(snapshot.value).toBe("validating");
    expect(snapshot.context).toEqual({ ...input, status: undefined, delayMs: 0 });
    expect(effects(actions)).toEqual(["spawn checkCall"]);
    expect(actions[0]?.params).toMatchObject({ src: "checkCall", input: { ...input, status: undefined } });
  });

  for (const [start, row] of Object.entries(TABLE) as [keyof typeof START, (typeof TABLE)[keyof typeof START]][]) {
    for (const [name, expected] of Object.entries(row) as [EventName, readonly string[]][]) {
      const [state, ...actions] = expected;
      it(`${start} --${name}--> ${state}${actions.length ? ` (${actions.join(", ")})` : ""}`, () => {
        const [next, returned] = step(reach(START[start]), name);
        expect(next.value).toBe(state);
        expect(effects(returned)).toEqual(actions);
      });
    }
    // An error from an actor the call is not running cannot arrive (only the current state's actor runs).
    const ignored = (Object.keys(EVENTS) as EventName[]).filter(
      (name) => !(name in row) && !EVENTS[name].type.startsWith("xstate.error."),
    );
    it(`${start} ignores the ${ignored.length} other outcomes it has no transition for`, () => {
      const snapshot = reach(START[start]);
      for (const name of ignored) {
        const [next, returned] = step(snapshot, name);
        expect(next.value, name).toBe(start);
        expect(returned, name).toEqual([]);
      }
    });
  }

  it("keeps the status a served or refused call settled with", () => {
    expect(reach(["checkCall settled ok"]).context.status).toBe("ok");
    expect(reach(["checkCall settled error"]).context.status).toBe("error");
  });

  it("settles a declined approval as an error", () => {
    expect(reach(["checkCall needs-approval", "askApproval declined"]).context.status).toBe("error");
  });

  it("keeps the status the tool's frame completed with", () => {
    expect(reach(["checkCall run", "runTool ok"]).context.status).toBe("ok");
    expect(reach(["checkCall run", "runTool error"]).context.status).toBe("error");
  });

  it("waits the delay runTool computed for a retry, then runs the tool again with the same input", () => {
    const waiting = reach(START.backingOff);
    expect(waiting.context.delayMs).toBe(250);
    expect(waiting.context.status).toBeUndefined();
    const [again, actions] = step(waiting, "backoff elapsed");
    expect(actions[1]?.params).toMatchObject({ src: "runTool", input: { ...input } });
    expect(step(again, "runTool ok")[0].context.status).toBe("ok");
  });

  it("leaves the status unset when the call ends pending or failed", () => {
    expect(reach(START.pending).context.status).toBeUndefined();
    expect(reach(START.failed).context.status).toBeUndefined();
  });

  it("passes its context to askApproval and runTool as their input", () => {
    const [, approval] = step(reach([]), "checkCall needs-approval");
    expect(approval[1]?.params).toMatchObject({ src: "askApproval", input: { ...input, status: undefined } });
    const [, run] = step(reach(START.awaitingApproval), "askApproval approved");
    expect(run[1]?.params).toMatchObject({ src: "runTool", input: { ...input, status: undefined } });
  });

  it("fails itself on an actor error it has no transition for (xstate's rule), so each state handles its actor's", () => {
    const [next, actions] = step(reach([]), "runTool throws");
    expect(next.status).toBe("error");
    expect(next.error).toBe("append after close");
    expect(effects(actions)).toEqual(["stop checkCall"]);
  });

  it("is done when settled, pending or waiting; a failed call waits to be stopped by its loop", () => {
    for (const state of ["settled", "pending", "waiting"] as const) expect(reach(START[state]).status).toBe("done");
    // Not final: a done event from it would reach a loop that already stopped on CALL.FAILED.
    for (const state of ["validating", "awaitingApproval", "running", "backingOff", "failed"] as const) {
      expect(reach(START[state]).status).toBe("active");
    }
  });
});

/** Runs the real machine (its real sendParent) under a parent that records what it is told. */
async function reportsOf(outputs: {
  check: CheckOutput | Error;
  approval?: ApprovalOutput;
  run?: "ok" | "error" | "waiting" | Error;
}) {
  const answer = <T>(value: T | Error | undefined) =>
    value instanceof Error ? Promise.reject(value) : Promise.resolve(value as T);
  const child = toolCallMachine.provide({
    actors: {
      checkCall: fromPromise(() => answer(outputs.check)),
      askApproval: fromPromise(() => answer(outputs.approval)),
      runTool: fromPromise(() =>
        answer(outputs.run).then((status) => ({ status: status as "ok" | "error" | "waiting" })),
      ),
    },
  });
  const parent = setup({
    types: { context: {} as { received: ToolCallParentEvent[] }, events: {} as ToolCallParentEvent },
    actors: { child },
  }).createMachine({
    context: { received: [] },
    invoke: { id: "call", src: "child", input, onDone: ".done" },
    on: {
      // As the loop does: a failed call ends the parent, which stops the call.
      "CALL.FAILED": {
        target: ".done",
        actions: assign({ received: ({ context, event }) => [...context.received, event] }),
      },
      "CALL.*": { actions: assign({ received: ({ context, event }) => [...context.received, event] }) },
    },
    initial: "waiting",
    states: { waiting: {}, done: { type: "final" } },
  });
  const actor = createActor(parent).start();
  await toPromise(actor);
  return actor.getSnapshot().context.received;
}

describe("toolCallMachine reports to its parent (sendParent)", () => {
  it("sends CALL.SETTLED with the index and the tool's status", async () => {
    expect(await reportsOf({ check: { kind: "run" }, run: "error" })).toEqual([
      { type: "CALL.SETTLED", index: 1, status: "error" },
    ]);
  });

  it("sends CALL.SETTLED ok for a call served from the journal", async () => {
    expect(await reportsOf({ check: { kind: "settled", status: "ok" } })).toEqual([
      { type: "CALL.SETTLED", index: 1, status: "ok" },
    ]);
  });

  it("sends CALL.PENDING with the step id when the approval is not given yet", async () => {
    expect(await reportsOf({ check: { kind: "needs-approval" }, approval: { kind: "pending" } })).toEqual([
      { type: "CALL.PENDING", index: 1, stepId: input.stepId },
    ]);
  });

  it("sends CALL.WAITING with the step id when the tool returned a durable wait", async () => {
    expect(await reportsOf({ check: { kind: "run" }, run: "waiting" })).toEqual([
      { type: "CALL.WAITING", index: 1, stepId: input.stepId },
    ]);
  });

  it("sends CALL.FAILED with the error an actor rejected with", async () => {
    const boom = new Error("appender closed");
    expect(await reportsOf({ check: { kind: "needs-approval" }, approval: { kind: "approved" }, run: boom })).toEqual([
      { type: "CALL.FAILED", index: 1, error: boom },
    ]);
  });
});

describe("toolCallMachine paths (xstate/graph)", () => {
  const events = Object.values(EVENTS) as AnyEventObject[];
  const options = { input, events };

  it("reaches every state by a shortest path, replayable with transition()", () => {
    const paths = getShortestPaths(machine, options);
    const reached = new Set(paths.map((p) => String(p.state.value)));
    expect([...reached].sort()).toEqual(Object.keys(START).sort());
    for (const path of paths) {
      let replayed = reach([]);
      for (const { event } of path.steps) [replayed] = transition(machine, replayed, event);
      expect(replayed.value).toBe(path.state.value);
    }
  });

  it("visits every state and takes every transition of the machine", () => {
    const defined = definedTransitions(machine);
    const taken = new Set<AnyTransitionDefinition>();
    const visited = new Set<string>(activeIds(machine, reach([])));
    for (const edge of adjacencyMapToArray(getAdjacencyMap(machine, options))) {
      const result = walk(machine, edge.state, edge.event);
      for (const t of result.taken) taken.add(t);
      for (const id of result.visited) visited.add(id);
    }
    expect([...visited].sort()).toEqual([...definedStates(machine)].sort());
    const label = (t: AnyTransitionDefinition) => defined.get(t) ?? `not defined: ${t.eventType}`;
    expect([...taken].map(label).sort()).toEqual([...defined.values()].sort());
    expect(defined.size).toBe(14); // 4 from validating, 4 from awaitingApproval, 5 from running, 1 from backingOff
  });
});

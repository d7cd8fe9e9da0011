import {
  type Actor,
  type ActorLogic,
  type ActorOptions,
  type AnyActorLogic,
  type AnyActorRef,
  type AnyActorScope,
  createActor,
  type EventObject,
  type Snapshot,
} from "xstate";
import { type AgentLoopInput, agentLoopMachine } from "../../machines/agentLoop.machine.ts";
import { toolCallMachine } from "../../machines/toolCall.machine.ts";

/**
 * The agent loop's chart with the runtime's actors provided, built once per loop instead of once
 * per run. `machine.provide(...)` builds a new machine (its state nodes, and every transition xstate
 * memoizes on them) each time; measured on one-turn runs through a PostgreSQL worker, that was
 * about a tenth of the worker's CPU. A run's actors close over its session, so the shared machine
 * holds stand-ins: actor logic (xstate's `ActorLogic` interface, nothing else) that hands each of
 * its calls to the run's own logic for that actor, found by the actor system the call is made in
 * (one per run: `createActor` makes it). The run's own logic (`fromPromise`, `fromCallback`) is
 * then what runs, snapshots, events and stops as xstate makes them.
 */

type AnyActorSystem = AnyActorRef["system"];
/** Any snapshot: a stand-in holds whatever its run's logic makes. */
type AnySnapshot = Snapshot<unknown>;

/** The run's own logic, by actor (`loop:prepare`, `tool:runTool`), by the actor system of its actor (alive as long as the run). */
const bound = new WeakMap<AnyActorSystem, ReadonlyMap<string, AnyActorLogic>>();

/**
 * The run's logic while `createActor` makes its actor: the actors of the chart's first state are
 * made inside it (their initial snapshots), before the actor and its system are handed back.
 */
let constructing: ReadonlyMap<string, AnyActorLogic> | undefined;

const runLogic = (scope: AnyActorScope, key: string): AnyActorLogic => {
  let logics = bound.get(scope.system);
  if (logics === undefined && constructing !== undefined) {
    logics = constructing;
    bound.set(scope.system, logics);
  }
  const logic = logics?.get(key);
  if (logic === undefined) throw new Error(`internal: actor ${key} has no implementation bound for this run`);
  return logic;
};

/**
 * The stand-in for one actor of the chart: each method of the logic interface that xstate calls
 * with the actor's scope is the run's logic's own. `getPersistedSnapshot` gets no scope to find
 * the run by: it returns the snapshot as it is, as promise and callback logic persist theirs (a
 * run persists through its journal, never through a snapshot).
 */
function standIn(key: string): ActorLogic<AnySnapshot, EventObject, unknown> {
  return {
    transition: (snapshot, event, scope) => runLogic(scope, key).transition(snapshot, event, scope),
    getInitialSnapshot: (scope, input) => runLogic(scope, key).getInitialSnapshot(scope, input),
    restoreSnapshot: (persisted, scope) => {
      const logic = runLogic(scope, key);
      return logic.restoreSnapshot ? logic.restoreSnapshot(persisted, scope) : persisted;
    },
    start: (snapshot, scope) => runLogic(scope, key).start?.(snapshot, scope),
    getPersistedSnapshot: (snapshot) => snapshot,
  };
}

/** Shared machines by loop (its config), and the actor names they were built for. */
const shared = new WeakMap<object, { readonly names: string; readonly machine: typeof agentLoopMachine }>();

type Logics = Readonly<Record<string, AnyActorLogic>>;

/**
 * The actor of one run of the loop `loopKey` (its config): the loop's shared chart, run with `loop`
 * (the loop's actors) and `tool` (each tool call's), made with `options` and not started.
 */
export function createRunActor(
  loopKey: object,
  loop: Logics,
  tool: Logics,
  options: ActorOptions<typeof agentLoopMachine> & { readonly input: AgentLoopInput },
): Actor<typeof agentLoopMachine> {
  const logics = new Map<string, AnyActorLogic>();
  for (const [name, logic] of Object.entries(loop)) logics.set(`loop:${name}`, logic);
  for (const [name, logic] of Object.entries(tool)) logics.set(`tool:${name}`, logic);
  const machine = sharedMachine(loopKey, [...logics.keys()].join(","), loop, tool);
  constructing = logics;
  let actor: Actor<typeof agentLoopMachine>;
  try {
    actor = createActor(machine, options);
  } finally {
    constructing = undefined;
  }
  bound.set(actor.system, logics);
  return actor;
}

/** The loop's chart with stand-ins for the actors named `names`, built once per loop (and again if they change). */
function sharedMachine(loopKey: object, names: string, loop: Logics, tool: Logics): typeof agentLoopMachine {
  let entry = shared.get(loopKey);
  if (entry?.names !== names) {
    const stand = (prefix: string, actors: Logics) =>
      Object.fromEntries(Object.keys(actors).map((name) => [name, standIn(`${prefix}:${name}`)]));
    const machine = agentLoopMachine.provide({
      actors: { ...stand("loop", loop), toolCall: toolCallMachine.provide({ actors: stand("tool", tool) }) },
    });
    entry = { names, machine };
    shared.set(loopKey, entry);
  }
  return entry.machine;
}

import {
  type Actor,
  type ActorLogic,
  type ActorOptions,
  type AnyActorLogic,
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

/** Any snapshot: a stand-in holds whatever its run's logic makes. */
type AnySnapshot = Snapshot<unknown>;

type Logics = Readonly<Record<string, AnyActorLogic>>;

/** A run's own logic: the loop's actors (`prepare`, …) and each tool call's (`runTool`, …). */
interface RunLogics {
  readonly loop: Logics;
  readonly tool: Logics;
}

/**
 * Where a run's logic is kept on its actor system (one per run, alive as long as the run): a
 * property of the system rather than an entry in a WeakMap, which the collector treats as an
 * ephemeron table, and which every stand-in call looked up.
 */
const LOGICS = Symbol("loom.runLogics");
type BoundSystem = AnyActorScope["system"] & { [LOGICS]?: RunLogics };

/**
 * The run's logic while `createRunActor` makes its actor: the actors of the chart's first state
 * are made inside it (their initial snapshots), before the actor and its system are handed back.
 */
let constructing: RunLogics | undefined;

const runLogic = (scope: AnyActorScope, kind: keyof RunLogics, name: string): AnyActorLogic => {
  const system = scope.system as BoundSystem;
  let logics = system[LOGICS];
  if (logics === undefined && constructing !== undefined) {
    logics = constructing;
    system[LOGICS] = logics;
  }
  const logic = logics?.[kind][name];
  if (logic === undefined) throw new Error(`internal: actor ${kind}:${name} has no implementation bound for this run`);
  return logic;
};

/**
 * The stand-in for one actor of the chart: each method of the logic interface that xstate calls
 * with the actor's scope is the run's logic's own. `getPersistedSnapshot` gets no scope to find
 * the run by: it returns the snapshot as it is, as promise and callback logic persist theirs (a
 * run persists through its journal, never through a snapshot).
 */
function standIn(kind: keyof RunLogics, name: string): ActorLogic<AnySnapshot, EventObject, unknown> {
  return {
    transition: (snapshot, event, scope) => runLogic(scope, kind, name).transition(snapshot, event, scope),
    getInitialSnapshot: (scope, input) => runLogic(scope, kind, name).getInitialSnapshot(scope, input),
    restoreSnapshot: (persisted, scope) => {
      const logic = runLogic(scope, kind, name);
      return logic.restoreSnapshot ? logic.restoreSnapshot(persisted, scope) : persisted;
    },
    start: (snapshot, scope) => runLogic(scope, kind, name).start?.(snapshot, scope),
    getPersistedSnapshot: (snapshot) => snapshot,
  };
}

/** Shared machines by loop (its config), and the actor names they were built for. */
const shared = new WeakMap<
  object,
  { readonly loop: readonly string[]; readonly tool: readonly string[]; readonly machine: typeof agentLoopMachine }
>();

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
  const logics: RunLogics = { loop, tool };
  const machine = sharedMachine(loopKey, logics);
  constructing = logics;
  let actor: Actor<typeof agentLoopMachine>;
  try {
    actor = createActor(machine, options);
  } finally {
    constructing = undefined;
  }
  (actor.system as BoundSystem)[LOGICS] = logics;
  return actor;
}

/** Whether `logics` has exactly the keys `names`, in that order (no array made: this runs once a run). */
function sameNames(logics: Logics, names: readonly string[]): boolean {
  let i = 0;
  for (const name in logics) if (names[i++] !== name) return false;
  return i === names.length;
}

/** The loop's chart with stand-ins for the run's actors, built once per loop (and again if their names change). */
function sharedMachine(loopKey: object, { loop, tool }: RunLogics): typeof agentLoopMachine {
  let entry = shared.get(loopKey);
  if (entry === undefined || !sameNames(loop, entry.loop) || !sameNames(tool, entry.tool)) {
    const stand = (kind: keyof RunLogics, actors: Logics) =>
      Object.fromEntries(Object.keys(actors).map((name) => [name, standIn(kind, name)]));
    const machine = agentLoopMachine.provide({
      actors: { ...stand("loop", loop), toolCall: toolCallMachine.provide({ actors: stand("tool", tool) }) },
    });
    entry = { loop: Object.keys(loop), tool: Object.keys(tool), machine };
    shared.set(loopKey, entry);
  }
  return entry.machine;
}

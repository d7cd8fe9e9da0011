import {
  type AnyActorLogic,
  type AnyActorRef,
  type AnyEventObject,
  fromCallback,
  fromPromise,
  type PromiseSnapshot,
} from "xstate";
import { agentLoopMachine } from "../machines/agentLoop.machine.ts";
import { toolCallMachine } from "../machines/toolCall.machine.ts";
import { ownStop, StepStop } from "./stepSignals.ts";

/**
 * The agent loop's chart with the runtime's actors provided, built once per loop instead of once
 * per run. `machine.provide(...)` builds a new machine (its state nodes, and every transition xstate
 * memoizes on them) each time; measured on one-turn runs through a PostgreSQL worker, that was
 * about a tenth of the worker's CPU. A run's actors close over its session, so the shared machine
 * holds stand-ins that, when started, look the run's own implementation up by the actor system
 * they run in (one per run: `createActor` makes it) and call it.
 *
 * Only promise and callback actors (`fromPromise`, `fromCallback`) can stand in this way; when any
 * actor is another kind, the run gets a machine of its own as before.
 */

type AnyActorSystem = AnyActorRef["system"];
/** A promise actor's creator, or a callback actor's callback: what a stand-in calls. */
type Creator = (args: { input: unknown; system: AnyActorSystem; self: AnyActorRef }) => unknown;
type Kind = "promise" | "callback";

/** A logic's `start`: the same source for every `fromPromise` (every `fromCallback`), so it tells the kind. */
const STARTS = new Map<string, Kind>([
  [String(fromPromise(async () => undefined).start), "promise"],
  [String(fromCallback(() => {}).start), "callback"],
]);

const creatorOf = (logic: unknown): { readonly kind: Kind; readonly creator: Creator } | undefined => {
  const l = logic as { config?: unknown; start?: unknown } | null;
  if (typeof l?.config !== "function" || typeof l.start !== "function") return undefined;
  const kind = STARTS.get(String(l.start));
  return kind === undefined ? undefined : { kind, creator: l.config as Creator };
};

/** The run's implementations, by the actor system of its actor (the key stays alive as long as the run). */
const bound = new WeakMap<AnyActorSystem, ReadonlyMap<string, Creator>>();

const implementation = (system: AnyActorSystem, key: string): Creator => {
  const creator = bound.get(system)?.get(key);
  if (creator === undefined) throw new Error(`internal: actor ${key} has no implementation bound for this run`);
  return creator;
};

/** A callback actor's stand-in: xstate's own logic, calling the run's callback. */
const callbackStandIn = (key: string) =>
  fromCallback((args) => implementation(args.system, key)(args) as (() => void) | undefined);

/** Shared machines by loop (its config), and the actor names they were built for. */
const shared = new WeakMap<object, { readonly names: string; readonly machine: typeof agentLoopMachine }>();

type Snap = PromiseSnapshot<unknown, unknown>;
const RESOLVE = "xstate.promise.resolve";
const REJECT = "xstate.promise.reject";
const STOP = "xstate.stop";

/** The stand-ins' stops, by actor: what `xstate.stop` aborts. */
const stops = new WeakMap<AnyActorRef, StepStop>();

/**
 * A stand-in: `fromPromise`'s logic (the same snapshots and events), except that the actor's abort
 * signal is made only when its creator reads `signal` (a step served from the journal never does;
 * an executed step takes the actor's stop as its own, see `StepSignals`, and makes one only if its
 * effect reads it). An AbortController per actor was the largest single cost of starting one.
 */
const promiseStandIn = (key: string) => {
  const initial = (input: unknown): Snap => ({ status: "active", output: undefined, error: undefined, input });
  return {
    config: key,
    transition: (state: Snap, event: AnyEventObject, scope: { self: AnyActorRef }): Snap => {
      if (state.status !== "active") return state;
      switch (event.type) {
        case RESOLVE:
          return { ...state, status: "done", output: event.data, input: undefined };
        case REJECT:
          return { ...state, status: "error", error: event.data, input: undefined };
        case STOP:
          stops.get(scope.self)?.abort();
          return { ...state, status: "stopped", input: undefined };
        default:
          return state;
      }
    },
    start: (state: Snap, { self, system, emit }: { self: AnyActorRef; system: AnyActorSystem; emit: unknown }) => {
      if (state.status !== "active") return;
      const stop = new StepStop();
      stops.set(self, stop);
      const args = {
        input: state.input,
        system,
        self,
        emit,
        get signal(): AbortSignal {
          return stop.signal;
        },
      };
      ownStop(args, stop);
      let running: PromiseLike<unknown>;
      try {
        running = implementation(system, key)(args) as PromiseLike<unknown>;
      } catch (e) {
        running = Promise.reject(e);
      }
      // Not awaited in an async function: the run's own promise is handed on as it is, not wrapped in another.
      Promise.resolve(running).then(
        (data) => {
          if (self.getSnapshot().status === "active") self.send({ type: RESOLVE, data });
        },
        (data) => {
          if (self.getSnapshot().status === "active") self.send({ type: REJECT, data });
        },
      );
    },
    getInitialSnapshot: (_: unknown, input: unknown) => initial(input),
    getPersistedSnapshot: (snapshot: Snap) => snapshot,
    restoreSnapshot: (snapshot: Snap) => snapshot,
  } as unknown as AnyActorLogic;
};

/**
 * The machine for one run whose actors are `loop` (the loop's) and `tool` (each tool call's), and
 * `bind`, to call with the run's actor before starting it.
 */
export function machineForRun(
  loopKey: object,
  loop: Readonly<Record<string, AnyActorLogic>>,
  tool: Readonly<Record<string, AnyActorLogic>>,
): { readonly machine: typeof agentLoopMachine; bind(actor: AnyActorRef): void } {
  const creators = new Map<string, Creator>();
  const kinds: string[] = [];
  const read = (prefix: string, actors: Readonly<Record<string, AnyActorLogic>>) => {
    for (const [name, logic] of Object.entries(actors)) {
      const c = creatorOf(logic);
      if (c === undefined) continue;
      creators.set(`${prefix}:${name}`, c.creator);
      kinds.push(`${prefix}:${name}:${c.kind}`);
    }
  };
  read("loop", loop);
  read("tool", tool);
  if (creators.size !== Object.keys(loop).length + Object.keys(tool).length) {
    const machine = agentLoopMachine.provide({
      actors: { ...loop, toolCall: toolCallMachine.provide({ actors: tool }) },
    } as never);
    return { machine, bind: () => {} };
  }
  const names = kinds.join(",");
  let entry = shared.get(loopKey);
  if (entry?.names !== names) {
    const stand = (prefix: string, actors: Readonly<Record<string, AnyActorLogic>>) =>
      Object.fromEntries(
        Object.keys(actors).map((name) => {
          const key = `${prefix}:${name}`;
          return [name, kinds.includes(`${key}:callback`) ? callbackStandIn(key) : promiseStandIn(key)];
        }),
      );
    const machine = agentLoopMachine.provide({
      actors: { ...stand("loop", loop), toolCall: toolCallMachine.provide({ actors: stand("tool", tool) }) },
    } as never);
    entry = { names, machine };
    shared.set(loopKey, entry);
  }
  return { machine: entry.machine, bind: (actor) => bound.set(actor.system, creators) };
}

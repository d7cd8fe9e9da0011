import { type AnyActorLogic, type AnyActorRef, fromPromise } from "xstate";
import { agentLoopMachine } from "../machines/agentLoop.machine.ts";
import { toolCallMachine } from "../machines/toolCall.machine.ts";

/**
 * The agent loop's chart with the runtime's actors provided, built once per loop instead of once
 * per run. `machine.provide(...)` builds a new machine (its state nodes, and every transition xstate
 * memoizes on them) each time; measured on one-turn runs through a PostgreSQL worker, that was
 * about a tenth of the worker's CPU. A run's actors close over its session, so the shared machine
 * holds stand-ins that, when started, look the run's own implementation up by the actor system
 * they run in (one per run: `createActor` makes it) and call it.
 *
 * Only promise actors (`fromPromise`) can stand in this way; when any actor is another kind, the
 * run gets a machine of its own as before.
 */

type AnyActorSystem = AnyActorRef["system"];
type PromiseCreator = (args: { input: unknown; system: AnyActorSystem; self: AnyActorRef }) => PromiseLike<unknown>;

/** A promise logic's `start`: the same source for every `fromPromise`, so it tells the kind. */
const PROMISE_START = String(fromPromise(async () => undefined).start);

const creatorOf = (logic: unknown): PromiseCreator | undefined => {
  const l = logic as { config?: unknown; start?: unknown } | null;
  return typeof l?.config === "function" && typeof l.start === "function" && String(l.start) === PROMISE_START
    ? (l.config as PromiseCreator)
    : undefined;
};

/** The run's implementations, by the actor system of its actor (the key stays alive as long as the run). */
const bound = new WeakMap<AnyActorSystem, ReadonlyMap<string, PromiseCreator>>();

/** Shared machines by loop (its config), and the actor names they were built for. */
const shared = new WeakMap<object, { readonly names: string; readonly machine: typeof agentLoopMachine }>();

// Not an async function: the run's own promise is handed to xstate as it is, not wrapped in another.
const standIn = (key: string) =>
  fromPromise((args) => {
    try {
      const creator = bound.get(args.system)?.get(key);
      if (creator === undefined) throw new Error(`internal: actor ${key} has no implementation bound for this run`);
      return creator(args);
    } catch (e) {
      return Promise.reject(e);
    }
  });

/**
 * The machine for one run whose actors are `loop` (the loop's) and `tool` (each tool call's), and
 * `bind`, to call with the run's actor before starting it.
 */
export function machineForRun(
  loopKey: object,
  loop: Readonly<Record<string, AnyActorLogic>>,
  tool: Readonly<Record<string, AnyActorLogic>>,
): { readonly machine: typeof agentLoopMachine; bind(actor: AnyActorRef): void } {
  const creators = new Map<string, PromiseCreator>();
  for (const [name, logic] of Object.entries(loop)) {
    const c = creatorOf(logic);
    if (c !== undefined) creators.set(`loop:${name}`, c);
  }
  for (const [name, logic] of Object.entries(tool)) {
    const c = creatorOf(logic);
    if (c !== undefined) creators.set(`tool:${name}`, c);
  }
  if (creators.size !== Object.keys(loop).length + Object.keys(tool).length) {
    const machine = agentLoopMachine.provide({
      actors: { ...loop, toolCall: toolCallMachine.provide({ actors: tool }) },
    } as never);
    return { machine, bind: () => {} };
  }
  const names = [...creators.keys()].join(",");
  let entry = shared.get(loopKey);
  if (entry?.names !== names) {
    const stand = (prefix: string, actors: Readonly<Record<string, AnyActorLogic>>) =>
      Object.fromEntries(Object.keys(actors).map((name) => [name, standIn(`${prefix}:${name}`)]));
    const machine = agentLoopMachine.provide({
      actors: { ...stand("loop", loop), toolCall: toolCallMachine.provide({ actors: stand("tool", tool) }) },
    } as never);
    entry = { names, machine };
    shared.set(loopKey, entry);
  }
  return { machine: entry.machine, bind: (actor) => bound.set(actor.system, creators) };
}

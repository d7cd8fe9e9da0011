import type { AnyActorScope } from "xstate";
import { LoomError } from "../../core/errors.ts";
import type { Fence } from "../base/appender.ts";
import type { RunSession } from "./session.ts";
import type { ToolCalls } from "./toolActors.ts";

/**
 * What one run's actors work on: its session, the fence its appends carry, and its tool calls'
 * bookkeeping. The actors' logic is built once (actors.ts, toolActors.ts) and finds the run it
 * works for through the actor system it runs in: one per run, made by `createActor`.
 */
export interface BoundRun {
  readonly session: RunSession;
  readonly fence: Fence | undefined;
  readonly calls: ToolCalls;
}

/** The actor system of an actor (xstate exports no name for it). */
export type ActorSystem = AnyActorScope["system"];

/**
 * Where a run is kept on its actor system (alive as long as the run): a property of the system
 * rather than an entry in a WeakMap, which the collector treats as an ephemeron table.
 */
const RUN = Symbol("loom.run");
type BoundSystem = ActorSystem & { [RUN]?: BoundRun };

/** Binds `run` to the actor system its actors run in (before the actor is started). */
export function bindRun(system: ActorSystem, run: BoundRun): void {
  (system as BoundSystem)[RUN] = run;
}

/** The run an actor of `system` works for. */
export function boundRun(system: ActorSystem): BoundRun {
  const run = (system as BoundSystem)[RUN];
  if (run === undefined)
    throw new LoomError(
      "internal",
      "internal: an actor of the agent loop runs in a system no run is bound to; make the run's actor with createRunActor (sharedMachine.ts), which binds it",
    );
  return run;
}

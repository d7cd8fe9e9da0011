import { type Actor, type ActorOptions, createActor } from "xstate";
import { type AgentLoopInput, agentLoopMachine } from "../../machines/agentLoop.machine.ts";
import { toolCallMachine } from "../../machines/toolCall.machine.ts";
import { loopLogic } from "./actors.ts";
import { type BoundRun, bindRun } from "./runBinding.ts";
import { plainCalls, toolCallLogic } from "./toolCallLogic.ts";

/**
 * The agent loop's chart with the runtime's actors provided, built once for every loop and run.
 * `machine.provide(...)` builds a new machine (its state nodes, and every transition xstate
 * memoizes on them) each time; the actors' logic (`fromPromise`, `fromCallback`) is built once
 * too: each finds the run it works for through its actor system (runBinding.ts), so a run keeps
 * alive none of its own.
 */
let machine: typeof agentLoopMachine | undefined;

/**
 * The actor of one run: the shared chart, made with `options` and not started, `run` bound to its
 * actor system. Its actors start with it (`actor.start()`), after the binding: none runs while
 * `createActor` makes it.
 */
export function createRunActor(
  run: BoundRun,
  options: ActorOptions<typeof agentLoopMachine> & { readonly input: AgentLoopInput },
): Actor<typeof agentLoopMachine> {
  machine ??= agentLoopMachine.provide({
    actors: { ...loopLogic, plainCalls, toolCall: toolCallMachine.provide({ actors: toolCallLogic }) },
  });
  const actor = createActor(machine, options);
  bindRun(actor.system, run);
  return actor;
}

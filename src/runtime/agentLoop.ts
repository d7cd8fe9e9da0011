import { createActor, type InspectionEvent, type Observer } from "xstate";
import { agentLoopMachine } from "../machines/agentLoop.machine.ts";
import { toolCallMachine } from "../machines/toolCall.machine.ts";
import { toolStepId } from "../projections/ids.ts";
import { responseAt } from "../projections/runState.ts";
import { completedOutput, projectToolCallLog } from "../projections/toolCallLog.ts";
import type { AgentOutput, InterruptedAgentRun } from "../projections/types.ts";
import { loopActors } from "./actors.ts";
import type { AgentLoopConfig } from "./config.ts";
import { AgentInterruptedError } from "./errors.ts";
import { hydrateForLog } from "./readers.ts";
import { type RunOptions, RunSession } from "./session.ts";
import { toolCallActors } from "./toolActors.ts";
import { validateConfig } from "./validateConfig.ts";

export interface RunRequest extends RunOptions {
  /** An xstate inspection observer (e.g. @statelyai/inspect's), to watch the run's statecharts. */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
}

export interface AgentLoop {
  readonly config: AgentLoopConfig;
  /**
   * Starts the run `runId` (with `input`), or resumes it from its journal. Resolves to the loop's
   * value; rejects with `AgentInterruptedError` when the run stops before its answer.
   */
  run(request: RunRequest): Promise<AgentOutput>;
}

const DEFAULT_MAX_ITERATIONS = 50;

/**
 * Makes a durable agent loop. Every model and tool call is a journaled step, so `run` with the
 * same `runId` resumes a stopped or crashed run where it stopped, never running a completed
 * step again. Throws `AgentLoopConfigError` for an invalid configuration.
 *
 * @example
 * const loop = agentLoop$({ id: "support", model, tools: { lookup }, toolCallLog: "lean" });
 * const journal = openSqliteJournal("./loom.db");
 * const { content, toolCallLog } = await loop.run({ runId: "r-1", input: "Where is my order?", journal });
 */
export function agentLoop$(config: AgentLoopConfig): AgentLoop {
  validateConfig(config);
  return { config, run: (request) => runLoop(config, request) };
}

async function runLoop(config: AgentLoopConfig, request: RunRequest): Promise<AgentOutput> {
  const session = new RunSession(config, request);
  const machine = agentLoopMachine.provide({
    actors: { ...loopActors(session), toolCall: toolCallMachine.provide({ actors: toolCallActors(session) }) },
  });
  const actor = createActor(machine, {
    input: { runId: request.runId, loopId: config.id, maxIterations: config.maxIterations ?? DEFAULT_MAX_ITERATIONS },
    ...(request.inspect ? { inspect: request.inspect } : {}),
  });
  const done = new Promise<void>((resolve, reject) => {
    actor.subscribe({ complete: resolve, error: reject });
  });
  const onAbort = () => actor.send({ type: "ABORT", reason: request.signal?.reason });
  request.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    actor.start();
    await done;
  } finally {
    request.signal?.removeEventListener("abort", onAbort);
  }
  const snapshot = actor.getSnapshot();
  switch (snapshot.value) {
    case "completed": {
      // A run completed earlier may have been compacted since: the full shape reads its archived outputs back.
      const state = await hydrateForLog(request.journal, session.state, session.mode);
      return completedOutput(state, session.mode) as AgentOutput;
    }
    case "interrupted":
      throw new AgentInterruptedError(interruptedRun(session, snapshot.context.pending));
    default:
      throw snapshot.context.error;
  }
}

function interruptedRun(session: RunSession, pending: readonly string[]): InterruptedAgentRun {
  const state = session.state;
  const turn = state.turns - 1;
  const calls = responseAt(state, turn)?.toolCalls ?? [];
  const waiting = new Set(pending); // a lookup per call: thousands of calls must not cost n × pending
  return {
    runId: session.options.runId,
    reason: state.interruption?.reason ?? "aborted",
    toolCallLog: projectToolCallLog(state, session.mode),
    iterations: state.turns,
    pendingApprovals: calls.flatMap((call, index) => {
      const stepId = toolStepId(session.loopId, turn, index);
      return waiting.has(stepId) ? [{ stepId, toolName: call.name, input: call.input }] : [];
    }),
  };
}

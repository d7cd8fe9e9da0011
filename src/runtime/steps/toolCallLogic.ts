import { fromPromise } from "xstate";
import type { CheckOutput, RunToolOutput, ToolCallInput } from "../../machines/toolCall.machine.ts";
import { askApproval } from "./approvalActor.ts";
import { plainCallsActor } from "./plainCalls.ts";
import { boundRun } from "./runBinding.ts";

/**
 * The toolCall chart's actors, built once: each finds its run's `ToolCalls` (toolActors.ts) through the
 * actor system it runs in (runBinding.ts).
 */
export const toolCallLogic = {
  checkCall: fromPromise<CheckOutput, ToolCallInput>(({ input, system }) => boundRun(system).calls.check(input)),
  askApproval,
  runTool: fromPromise<RunToolOutput, ToolCallInput>((actor) => boundRun(actor.system).calls.run(actor.input, actor)),
};

/** The loop's one actor for the calls that cannot wait (see `ToolCalls.chartedCalls`), built once. */
export const plainCalls = plainCallsActor((system) => boundRun(system).calls);

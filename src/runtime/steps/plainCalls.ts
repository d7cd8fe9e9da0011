import { type AnyActorScope, fromCallback } from "xstate";
import { LoomError } from "../../core/errors.ts";
import type { PlainCallsEvent } from "../../machines/agentLoop.protocol.ts";
import type {
  CheckOutput,
  RunToolOutput,
  ToolCallInput,
  ToolCallParentEvent,
} from "../../machines/toolCall.machine.ts";
import { CallStop } from "../base/runStop.ts";

/**
 * The two steps of one tool call, as the toolCall chart invokes them: `checkCall` (served,
 * refused, or cleared to run) and `runTool` (the tool as a durable step, stopped by `stop`).
 */
export interface CallSteps {
  check(input: ToolCallInput): Promise<CheckOutput>;
  run(input: ToolCallInput, stop: CallStop): Promise<RunToolOutput>;
}

/**
 * A call that cannot wait (no approval, one attempt): the toolCall chart's only paths for it,
 * validating → running → settled (or pending, a sub-agent waiting), told as the chart tells its
 * parent. A call that may wait was dispatched without its chart: that is refused, as a failure.
 * test/runtime/plainCalls.test.ts holds it to the chart, case by case.
 */
export async function plainCall(steps: CallSteps, input: ToolCallInput, stop: CallStop): Promise<ToolCallParentEvent> {
  const { index, stepId } = input;
  const checked = await steps.check(input);
  if (checked.kind === "settled") return { type: "CALL.SETTLED", index, status: checked.status };
  if (checked.kind === "run") {
    const ran = await steps.run(input, stop);
    if (ran.status === "pending") return { type: "CALL.PENDING", index, stepId }; // a sub-agent waits for an approval
    if (ran.status === "waiting") return { type: "CALL.WAITING", index, stepId }; // a durable wait (docs/waits.md)
    if (ran.status !== "retry") return { type: "CALL.SETTLED", index, status: ran.status };
  }
  throw new LoomError(
    "internal",
    `internal: call ${stepId} of run ${input.runId} may wait (${checked.kind}) but was dispatched without its chart; a bug in Loom: report it with the run's story (loom show ${input.runId})`,
  );
}

/**
 * The loop chart's one actor for every call that cannot wait, for the whole run: each call it
 * is told to run reports back as a toolCall chart does (a failed step as `CALL.FAILED`). An actor
 * a call (or a child machine) cost more than the instant call itself. Stopped, or told
 * `CALLS.STOP`, its calls' stops abort and they report nothing. Built once: `stepsOf` finds the
 * steps of the run it runs for through its actor system.
 */
export function plainCallsActor(stepsOf: (system: AnyActorScope["system"]) => CallSteps) {
  return fromCallback<PlainCallsEvent, { runId: string }>(({ receive, sendBack, system }) => {
    const steps = stepsOf(system);
    const live = new Set<CallStop>();
    const stopAll = () => {
      for (const call of live) call.stop();
      live.clear();
    };
    receive((event) => {
      if (event.type === "CALLS.STOP") return stopAll();
      for (const input of event.calls) {
        const call = new CallStop();
        live.add(call);
        plainCall(steps, input, call).then(
          (told) => {
            if (live.delete(call)) sendBack(told);
          },
          (error: unknown) => {
            if (live.delete(call)) sendBack({ type: "CALL.FAILED", index: input.index, error });
          },
        );
      }
    });
    return stopAll;
  });
}

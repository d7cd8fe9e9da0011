import { describe, expect, it } from "vitest";
import { type AnyActorLogic, assign, createActor, fromPromise, sendTo, setup } from "xstate";
import { isLoomError } from "../../src/core/errors.ts";
import {
  type CheckOutput,
  type RunToolOutput,
  type ToolCallInput,
  type ToolCallParentEvent,
  toolCallMachine,
} from "../../src/machines/toolCall.machine.ts";
import { type CallSteps, plainCallsActor } from "../../src/runtime/steps/plainCalls.ts";

/**
 * The contract between the two ways a tool call is run: the plain-call path (the loop's one
 * `plainCalls` actor, for a call that cannot wait) and the toolCall chart. Given the same step
 * outcomes, a call that takes none of the chart's waiting paths (approval, retry) must be told to
 * the loop the same way, after the same steps, either way; stopped, either way aborts its tool and
 * tells nothing.
 */

const INPUT: ToolCallInput = {
  runId: "run-1",
  turn: 0,
  index: 2,
  stepId: "support#turn:0:tool:2",
  call: { id: "c1", name: "lookup", input: { q: "x" } },
};

/** One case: what each step does (returns, or throws), or `never` for a step that never ends. */
interface Case {
  readonly check: CheckOutput | Error;
  readonly run?: RunToolOutput | Error | "never";
}

const boom = new Error("the journal is gone");
const toolBoom = new Error("the tool's append failed");

/** The non-waiting paths of the toolCall chart, each with the step outcomes that take it. */
const CASES: Record<string, Case> = {
  "served or refused, ok": { check: { kind: "settled", status: "ok" } },
  "served or refused, error": { check: { kind: "settled", status: "error" } },
  "the check fails": { check: boom },
  "runs, ok": { check: { kind: "run" }, run: { status: "ok" } },
  "runs, fed back as an error": { check: { kind: "run" }, run: { status: "error" } },
  "runs a sub-agent that waits for an approval": { check: { kind: "run" }, run: { status: "pending" } },
  "the run fails": { check: { kind: "run" }, run: toolBoom },
};

/** What a way of running the call did: the steps it took, what it told the loop, whether the tool's stop aborted. */
interface Outcome {
  steps: string[];
  told: ToolCallParentEvent[];
  aborted: boolean;
}

function fakeSteps(c: Case, outcome: Outcome) {
  const settle = async <T>(value: T | Error | "never" | undefined, signal: AbortSignal | undefined): Promise<T> => {
    if (value === "never") {
      signal?.addEventListener("abort", () => {
        outcome.aborted = true;
      });
      return new Promise<T>(() => {});
    }
    if (value instanceof Error) throw value;
    return value as T;
  };
  return {
    check: (input: ToolCallInput) => {
      outcome.steps.push(`check ${input.stepId}`);
      return settle<CheckOutput>(c.check, undefined);
    },
    run: (input: ToolCallInput, actor: { readonly signal: AbortSignal }) => {
      outcome.steps.push(`run ${input.stepId}`);
      return settle<RunToolOutput>(c.run, actor.signal);
    },
  };
}

/** A parent that runs `child` as the loop does and keeps what it is told; `STOP` leaves the state, stopping it. */
function parentOf(child: AnyActorLogic, start: "invoked" | "told") {
  return setup({
    types: { context: {} as { told: ToolCallParentEvent[] } },
    actors: { child },
  }).createMachine({
    context: { told: [] },
    initial: "on",
    states: {
      on: {
        invoke: { id: "child", src: "child", input: start === "invoked" ? INPUT : { runId: INPUT.runId } },
        on: {
          RUN: { actions: sendTo("child", { type: "CALLS.RUN", calls: [INPUT] }) },
          "CALL.*": {
            actions: assign({ told: ({ context, event }) => [...context.told, event as ToolCallParentEvent] }),
          },
          STOP: "off",
        },
      },
      off: {},
    },
  });
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 5));

/** The call run by its toolCall chart, the steps being its invoked actors. */
async function byChart(c: Case, stop = false): Promise<Outcome> {
  const outcome: Outcome = { steps: [], told: [], aborted: false };
  const steps = fakeSteps(c, outcome);
  const chart = toolCallMachine.provide({
    actors: {
      checkCall: fromPromise<CheckOutput, ToolCallInput>(({ input }) => steps.check(input)),
      runTool: fromPromise<RunToolOutput, ToolCallInput>((actor) => steps.run(actor.input, actor)),
    },
  });
  const actor = createActor(parentOf(chart, "invoked")).start();
  await settled();
  if (stop) {
    actor.send({ type: "STOP" });
    await settled();
  }
  outcome.told = actor.getSnapshot().context.told;
  return outcome;
}

/** The call run by the plain-call path: the loop's `plainCalls` actor, told CALLS.RUN. */
async function byPlainCalls(c: Case, stop = false): Promise<Outcome> {
  const outcome: Outcome = { steps: [], told: [], aborted: false };
  const steps: CallSteps = fakeSteps(c, outcome);
  const actor = createActor(
    parentOf(
      plainCallsActor(() => steps),
      "told",
    ),
  ).start();
  actor.send({ type: "RUN" });
  await settled();
  if (stop) {
    actor.send({ type: "STOP" });
    await settled();
  }
  outcome.told = actor.getSnapshot().context.told;
  return outcome;
}

describe("the plain-call path equals the toolCall chart's non-waiting paths", () => {
  for (const [name, c] of Object.entries(CASES)) {
    it(`${name}: the same steps, the same event told to the loop`, async () => {
      const chart = await byChart(c);
      const plain = await byPlainCalls(c);
      expect(chart.told).toHaveLength(1);
      expect(plain).toEqual(chart);
      // A failure is told with the very error its step threw.
      if (chart.told[0]?.type === "CALL.FAILED")
        expect(plain.told[0]?.type === "CALL.FAILED" && plain.told[0].error).toBe(chart.told[0].error);
    });
  }

  it("the table covers every way the chart tells a call's end without waiting", async () => {
    const told = new Set<string>();
    for (const c of Object.values(CASES)) {
      const [event] = (await byChart(c)).told;
      told.add(event?.type === "CALL.SETTLED" ? `${event.type} ${event.status}` : String(event?.type));
    }
    expect([...told].sort()).toEqual(["CALL.FAILED", "CALL.PENDING", "CALL.SETTLED error", "CALL.SETTLED ok"]);
  });

  it("stopped while the tool runs: either way the tool's signal aborts and nothing is told", async () => {
    const c: Case = { check: { kind: "run" }, run: "never" };
    const chart = await byChart(c, true);
    const plain = await byPlainCalls(c, true);
    expect(chart).toEqual({ steps: [`check ${INPUT.stepId}`, `run ${INPUT.stepId}`], told: [], aborted: true });
    expect(plain).toEqual(chart);
  });

  it("a call that may wait (approval, retry) is the chart's alone: the plain path refuses it as a failure", async () => {
    const approval = await byPlainCalls({ check: { kind: "needs-approval" } });
    expect(approval.steps).toEqual([`check ${INPUT.stepId}`]);
    expect(approval.told).toMatchObject([{ type: "CALL.FAILED", index: INPUT.index }]);
    const refused = (approval.told[0] as { error?: unknown }).error;
    expect(String(refused)).toContain("may wait (needs-approval)");
    expect(isLoomError(refused) && refused.code).toBe("internal");
    const retry = await byPlainCalls({ check: { kind: "run" }, run: { status: "retry", attempt: 1, delayMs: 10 } });
    expect(retry.told).toMatchObject([{ type: "CALL.FAILED", index: INPUT.index }]);
  });
});

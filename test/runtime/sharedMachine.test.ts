import { describe, expect, it } from "vitest";
import { type AnyActorLogic, createMachine, fromCallback, fromPromise, toPromise } from "xstate";
import type { Ending, ModelCallsEvent, PlainCallsEvent } from "../../src/machines/agentLoop.machine.ts";
import { createRunActor } from "../../src/runtime/steps/sharedMachine.ts";

/** One run's actors: a one-turn run that answers at once, each actor telling which run it belongs to. */
function runActors(runId: string, seen: string[], prepare?: AnyActorLogic) {
  const loop: Record<string, AnyActorLogic> = {
    prepare:
      prepare ??
      fromPromise(async () => {
        seen.push(`${runId} prepare`);
        return { kind: "ready" };
      }),
    modelCalls: fromCallback<ModelCallsEvent>(({ receive, sendBack }) => {
      receive(() => {
        seen.push(`${runId} model`);
        queueMicrotask(() => sendBack({ type: "MODEL.DONE", output: { ok: true, response: { toolCalls: [] } } }));
      });
    }),
    plainCalls: fromCallback<PlainCallsEvent>(() => {}),
    // The one actor that journals the run's ending (completed here).
    end: fromPromise<void, Ending>(async ({ input }) => {
      if (input.kind === "completed") seen.push(`${runId} complete`);
    }),
  };
  const tool = {
    checkCall: fromPromise(async () => ({ kind: "run" })),
    askApproval: fromPromise(async () => ({ kind: "pending" })),
    runTool: fromPromise(async () => ({ status: "ok" })),
  };
  return { loop, tool };
}

function start(loopKey: object, runId: string, seen: string[], prepare?: AnyActorLogic) {
  const { loop, tool } = runActors(runId, seen, prepare);
  const actor = createRunActor(loopKey, loop, tool, { input: { runId, loopId: "support", maxIterations: 3 } });
  return { machine: actor.logic, actor };
}

describe("createRunActor: one machine per loop, each run's own actors", () => {
  it("two runs of one loop share the machine and each runs its own actors", async () => {
    const key = {};
    const seen: string[] = [];
    const a = start(key, "run-a", seen);
    const b = start(key, "run-b", seen);
    expect(b.machine).toBe(a.machine);
    a.actor.start();
    b.actor.start();
    await Promise.all([toPromise(a.actor), toPromise(b.actor)]);
    expect(a.actor.getSnapshot().value).toBe("completed");
    expect(b.actor.getSnapshot().value).toBe("completed");
    expect(seen.filter((s) => s.startsWith("run-a"))).toEqual(["run-a prepare", "run-a model", "run-a complete"]);
    expect(seen.filter((s) => s.startsWith("run-b"))).toEqual(["run-b prepare", "run-b model", "run-b complete"]);
  });

  it("shares the machine whatever kind of logic an actor is (a state machine as prepare)", async () => {
    const key = {};
    const seen: string[] = [];
    const first = start(key, "run-a", seen);
    const prepare = createMachine({ initial: "done", states: { done: { type: "final" } }, output: { kind: "ready" } });
    const second = start(key, "run-b", seen, prepare);
    expect(second.machine).toBe(first.machine);
    second.actor.start();
    await toPromise(second.actor);
    expect(second.actor.getSnapshot().value).toBe("completed");
    expect(seen).toEqual(["run-b model", "run-b complete"]);
  });

  it("a stopped actor's step sees xstate's abort signal (the run's promise actor is what runs)", async () => {
    let signal: AbortSignal | undefined;
    const prepare = fromPromise(({ signal: s }) => {
      signal = s;
      return new Promise(() => {});
    });
    const { actor } = start({}, "run-a", [], prepare);
    actor.start();
    await Promise.resolve();
    expect(signal?.aborted).toBe(false);
    actor.stop();
    expect(signal?.aborted).toBe(true);
    expect((signal?.reason as Error | undefined)?.name).toBe("AbortError");
  });
});

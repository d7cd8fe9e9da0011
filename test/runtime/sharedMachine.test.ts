import { describe, expect, it } from "vitest";
import { assign, createActor, createMachine, fromPromise, toPromise } from "xstate";
import { isLoomError } from "../../src/core/errors.ts";
import { type BoundRun, bindRun, boundRun } from "../../src/runtime/steps/runBinding.ts";
import { createRunActor } from "../../src/runtime/steps/sharedMachine.ts";

const input = (runId: string) => ({ input: { runId, loopId: "support", maxIterations: 3 } });

/** A run as its actors see it (only its identity matters here). */
const fakeRun = (name: string) => ({ name }) as unknown as BoundRun;

/** A parent invoking a child that reports which run its actor system is bound to. */
const parent = createMachine({
  types: {} as { context: { seen?: unknown } },
  initial: "asking",
  context: {},
  states: {
    asking: {
      invoke: {
        src: fromPromise(async ({ system }) => (boundRun(system) as unknown as { name: string }).name),
        onDone: { target: "done", actions: assign({ seen: ({ event }) => event.output }) },
      },
    },
    done: { type: "final" },
  },
});

describe("createRunActor: one machine and one set of actors for every run", () => {
  it("two runs (of any loops) share the machine, each bound to its own actor system", () => {
    const a = createRunActor(fakeRun("a"), input("run-a"));
    const b = createRunActor(fakeRun("b"), input("run-b"));
    expect(b.logic).toBe(a.logic);
    expect(a.system).not.toBe(b.system);
    expect((boundRun(a.system) as unknown as { name: string }).name).toBe("a");
    expect((boundRun(b.system) as unknown as { name: string }).name).toBe("b");
  });

  it("an actor built once finds the run it works for through its system", async () => {
    const runs = ["a", "b"].map((name) => {
      const actor = createActor(parent);
      bindRun(actor.system, fakeRun(name));
      return actor.start();
    });
    await Promise.all(runs.map((actor) => toPromise(actor)));
    expect(runs.map((actor) => actor.getSnapshot().context.seen)).toEqual(["a", "b"]);
  });

  it("an actor in a system no run is bound to fails, saying so", async () => {
    const actor = createActor(parent).start();
    const error = await toPromise(actor).catch((e: unknown) => e);
    expect(isLoomError(error) && error.code).toBe("internal");
    expect(String(error)).toMatch(/no run is bound/);
  });
});

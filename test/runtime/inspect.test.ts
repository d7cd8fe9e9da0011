import { createServer } from "node:net";
import { createWebSocketInspector } from "@statelyai/inspect";
import { createInspectorServer } from "@statelyai/inspect/server";
import { describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { AnyActorRef, InspectionEvent, StateValue } from "xstate";
import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

const journal = () => createJournal({ store: memoryStore({ json: true }) });

const tools: Record<string, Tool> = {
  add: { description: "adds a and b", execute: (input) => ({ sum: (input as { a: number }).a + 1 }) },
  refund: { description: "refunds an order", requiresApproval: true, execute: () => ({ refunded: true }) },
};
const addCall = (id: string) => ({ id, name: "add", input: { a: 1 } });

/** A state value as a dotted path: `running.dispatching`. */
const stateOf = (value: StateValue): string =>
  typeof value === "string"
    ? value
    : Object.entries(value)
        .map(([parent, child]) => `${parent}.${stateOf(child as StateValue)}`)
        .join();

const pushChanged = (walk: string[], value: string) => {
  if (walk.at(-1) !== value) walk.push(value);
};

/**
 * An inspection observer that records the states of the root agentLoop actor and of every call's
 * chart: from `@xstate.snapshot` (where an actor rests after each event) and from
 * `@xstate.microstep` too (every state entered, so transient ones like running.deciding show);
 * what the loop tells its plainCalls actor and what that actor reports back; and the same of its
 * modelCalls actor.
 */
function recorder() {
  const snapshots: string[] = [];
  const entered: string[] = [];
  const calls = new Map<string, string[]>();
  const plain: string[] = [];
  const model: string[] = [];
  let last: { value: StateValue; context: unknown } | undefined;
  const inspect = (event: InspectionEvent) => {
    if (event.type === "@xstate.event") {
      const e = event.event as { type: string; index?: number; status?: string; calls?: { index: number }[] };
      const m = event.event as { type: string; turn?: number; output?: { ok: boolean } };
      if ((event.actorRef as AnyActorRef).id === "modelCalls" && m.type === "MODEL.CALL") model.push(`call ${m.turn}`);
      else if ((event.sourceRef as AnyActorRef | undefined)?.id === "modelCalls")
        model.push(`${m.type} ${m.output?.ok}`);
      else if ((event.actorRef as AnyActorRef).id === "plainCalls" && e.type === "CALLS.RUN") {
        plain.push(`run ${e.calls?.map((c) => c.index).join(",")}`);
      } else if ((event.sourceRef as AnyActorRef | undefined)?.id === "plainCalls")
        plain.push(`${e.type} ${e.index} ${e.status}`);
      return;
    }
    if (event.type !== "@xstate.snapshot" && event.type !== "@xstate.microstep") return;
    const snapshot = event.snapshot as { value?: StateValue; context?: unknown; status?: string; output?: unknown };
    const id = (event.actorRef as AnyActorRef).id;
    if (snapshot.value === undefined) return; // a promise or callback actor's snapshot
    const value = stateOf(snapshot.value);
    if (event.actorRef.sessionId === event.rootId) {
      pushChanged(entered, value);
      if (event.type === "@xstate.snapshot") {
        pushChanged(snapshots, value);
        last = { value: snapshot.value, context: snapshot.context };
      }
    } else if (id.startsWith("call:") && event.type === "@xstate.snapshot") {
      const key = `${id}@${event.actorRef.sessionId}`;
      const walk = calls.get(key) ?? [];
      pushChanged(walk, value);
      calls.set(key, walk);
    }
  };
  return { inspect, snapshots, entered, calls, plain, model, last: () => last };
}

describe("loop.run({ inspect })", () => {
  it("walks the statechart's states in order for a run that completes", async () => {
    const model = scriptedModel([
      { toolCalls: [addCall("a")] },
      { toolCalls: [addCall("b"), addCall("c")] },
      { content: "done", toolCalls: [] },
    ]);
    const seen = recorder();
    const out = await agentLoop$({ id: "t", model, tools }).run({
      runId: "r",
      input: "hi",
      journal: journal(),
      inspect: seen.inspect,
    });
    expect(out.content).toBe("done");
    // The turn's last call settling goes straight to the next model call: deciding comes first only.
    const turn = ["running.callingModel", "running.dispatching"];
    expect(seen.entered).toEqual([
      "starting",
      "running.deciding",
      ...turn,
      ...turn,
      "running.callingModel",
      "finishing",
      "completed",
    ]);
    // Where the loop rests between events: the same walk without the transient deciding.
    expect(seen.snapshots).toEqual(seen.entered.filter((s) => s !== "running.deciding"));
    // A call that cannot wait (no approval, one attempt) has no chart: the loop tells its plainCalls
    // actor to run the turn's calls, and that actor reports each back as a chart would.
    expect(seen.calls.size).toBe(0);
    expect(seen.plain).toEqual(["run 0", "CALL.SETTLED 0 ok", "run 0,1", "CALL.SETTLED 0 ok", "CALL.SETTLED 1 ok"]);
    // The model calls go to the loop's one modelCalls actor, told each turn, which reports each back.
    expect(seen.model).toEqual(["call 0", "MODEL.DONE true", "call 1", "MODEL.DONE true", "call 2", "MODEL.DONE true"]);
  });

  it("ends interrupting → interrupted at the iteration limit", async () => {
    const model = scriptedModel(({ call }) => ({ toolCalls: [addCall(`c${call}`)] }));
    const seen = recorder();
    const run = agentLoop$({ id: "t", model, tools, maxIterations: 1 }).run({
      runId: "r",
      input: "hi",
      journal: journal(),
      inspect: seen.inspect,
    });
    const error = await run.catch((e: unknown) => e);
    expect(isAgentInterruptedError(error) && error.run.reason).toBe("max-iterations");
    expect(seen.entered).toEqual([
      "starting",
      "running.deciding",
      "running.callingModel",
      "running.dispatching",
      "running.deciding",
      "interrupting",
      "interrupted",
    ]);
    expect(seen.snapshots.slice(-2)).toEqual(["interrupting", "interrupted"]);
    expect(seen.last()?.context).toMatchObject({ turn: 1, interrupt: { reason: "max-iterations" } });
  });

  it("ends interrupting → interrupted with the call resting in pending when an approval is not given", async () => {
    const model = scriptedModel([{ toolCalls: [{ id: "r1", name: "refund", input: { order: 7 } }] }]);
    const seen = recorder();
    const error = await agentLoop$({ id: "t", model, tools })
      .run({ runId: "r", input: "hi", journal: journal(), inspect: seen.inspect })
      .catch((e: unknown) => e);
    expect(isAgentInterruptedError(error) && error.run.reason).toBe("approval-pending");
    expect(seen.snapshots).toEqual([
      "starting",
      "running.callingModel",
      "running.dispatching",
      "interrupting",
      "interrupted",
    ]);
    expect([...seen.calls.values()]).toEqual([["validating", "awaitingApproval", "pending"]]);
  });
});

/** A free TCP port on loopback (the inspector server takes a port, not 0). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("@statelyai/inspect over a websocket", () => {
  it("streams the run's snapshots through createInspectorServer to a connected client", async () => {
    const port = await freePort();
    const server = createInspectorServer({ port, autoOpen: false });
    const client = new WebSocket(`ws://127.0.0.1:${port}`);
    const inspector = createWebSocketInspector({ url: `ws://127.0.0.1:${port}` });
    try {
      await new Promise((resolve, reject) => {
        client.once("open", resolve);
        client.once("error", reject);
      });
      const walk: string[] = [];
      const completed = new Promise<void>((resolve) => {
        client.on("message", (data) => {
          const event = JSON.parse(String(data)) as {
            type: string;
            sessionId: string;
            rootId?: string;
            snapshot?: { value?: StateValue };
          };
          if (event.type !== "@xstate.snapshot" || event.sessionId !== event.rootId || !event.snapshot?.value) return;
          pushChanged(walk, stateOf(event.snapshot.value));
          if (walk.at(-1) === "completed") resolve();
        });
      });
      const model = scriptedModel([{ toolCalls: [addCall("a")] }, { content: "done", toolCalls: [] }]);
      const out = await agentLoop$({ id: "t", model, tools }).run({
        runId: "r",
        input: "hi",
        journal: journal(),
        inspect: inspector.inspect,
      });
      expect(out.content).toBe("done");
      await completed;
      expect(walk).toEqual([
        "starting",
        "running.callingModel",
        "running.dispatching",
        "running.callingModel",
        "finishing",
        "completed",
      ]);
    } finally {
      inspector.stop();
      client.close();
      server.stop();
    }
  });
});

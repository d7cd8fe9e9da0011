import { describe, expect, it } from "vitest";
import { isOwnershipLostError, type OwnershipLostError } from "../../src/core/errors.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { EventStore, RunLease } from "../../src/events/store.ts";
import type { NewEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { HeldLease, holdLease, LEASE_MARGIN } from "../../src/runtime/base/heldLease.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

/**
 * No effect after the lease is gone (issue 30 item 2): a process paused after a step's
 * `frame.started` was appended, past its lease, must not call the step's model or tool when it
 * wakes. Before each effect the run checks its lease by the local monotonic clock; when it may have
 * lapsed, it renews it (fenced) first, and goes on only if that renewal succeeds.
 */

/** A monotonic clock the test moves. */
function clock(start = 0) {
  let t = start;
  return { now: () => t, set: (ms: number) => (t = ms) };
}

/** A store whose renewals are counted (and can be made to fail, or to take a while by `clock`). */
function renewals(inner: EventStore, during?: () => void) {
  const counted = {
    calls: 0,
    fail: undefined as Error | undefined,
    store: {
      ...inner,
      async renew(lease: RunLease, leaseMs: number) {
        counted.calls++;
        during?.();
        if (counted.fail) throw counted.fail;
        return inner.renew(lease, leaseMs);
      },
    } as EventStore,
  };
  return counted;
}

/**
 * A loop whose turn 0 asks for one `act` call, and turn 1 answers; `effects` lists each model and
 * tool invocation. `afterStart` runs once the tool's `frame.started` is appended (durable), before
 * the run goes on: where the test pauses the process and moves the clock.
 */
function loopWithPause(store: EventStore, afterStart: () => Promise<void> | void) {
  const effects: string[] = [];
  let paused = false;
  const journaled: EventStore = {
    ...store,
    async append(runId: string, entries: readonly NewEntry[], options) {
      const result = await store.append(runId, entries, options);
      const toolStarted = entries.some((e) => e.type === "frame.started" && e.data.frameId.includes(":tool:"));
      if (toolStarted && !paused) {
        paused = true;
        await afterStart();
      }
      return result;
    },
  };
  const loop = agentLoop$({
    id: "h",
    model: scriptedModel(({ turn }) => {
      effects.push(`model:${turn}`);
      return turn === 0 ? { toolCalls: [{ id: "c", name: "act", input: {} }] } : { content: "ok", toolCalls: [] };
    }),
    tools: {
      act: {
        description: "acts on the world",
        execute: (_input, { stepId }) => {
          effects.push(stepId);
          return { acted: true };
        },
      },
    },
  });
  return { loop, effects, journal: createJournal({ store: journaled }) };
}

describe("HeldLease", () => {
  it("is fresh until the lease less its margin has passed since the acquire was sent", () => {
    const c = clock(1000);
    const held = holdLease(memoryStore(), { runId: "r" } as RunLease, { leaseMs: 2000, sentAt: 1000, now: c.now });
    expect(held.fresh()).toBe(true);
    c.set(1000 + 2000 * (1 - LEASE_MARGIN) - 1);
    expect(held.fresh()).toBe(true);
    expect(held.confirm("s")).toBeUndefined(); // no round trip while fresh
    c.set(1000 + 2000 * (1 - LEASE_MARGIN));
    expect(held.fresh()).toBe(false);
  });

  it("proves the lease from when a renewal was sent, not from when it came back", async () => {
    const store = memoryStore();
    const lease = await store.acquire("r", { owner: "a", leaseMs: 60_000 });
    const c = clock(0);
    const slow = renewals(store, () => c.set(c.now() + 1400)); // each renewal takes 1.4 s by the clock
    const held = holdLease(slow.store, lease, { leaseMs: 2000, sentAt: 0, now: c.now });
    c.set(5000);
    await held.renew(); // sent at 5000, back at 6400: fresh until 5000 + 1500
    expect(c.now()).toBe(6400);
    expect(held.fresh()).toBe(true);
    c.set(6500);
    expect(held.fresh()).toBe(false);
  });

  it("a renewal that stalls past the lease proves too little: confirm renews again", async () => {
    const store = memoryStore();
    const lease = await store.acquire("r", { owner: "a", leaseMs: 60_000 });
    const c = clock(0);
    let first = true;
    const slow = renewals(store, () => {
      c.set(c.now() + (first ? 4500 : 10)); // the first renewal is paused 4.5 s on its way
      first = false;
    });
    const held = new HeldLease(slow.store, lease, { leaseMs: 2000, sentAt: 0, now: c.now });
    c.set(3000);
    await held.confirm("step-1");
    expect(slow.calls).toBe(2);
    expect(held.fresh()).toBe(true);
  });

  it("an unknown age (a plain lease) is renewed before the first effect", async () => {
    const store = memoryStore();
    const lease = await store.acquire("r", { owner: "a", leaseMs: 60_000 });
    const counted = renewals(store);
    const held = holdLease(counted.store, lease, { leaseMs: 2000, now: clock(0).now });
    await held.confirm("step-1");
    expect(counted.calls).toBe(1);
    expect(held.confirm("step-2")).toBeUndefined();
  });

  it("a renewal that fails for another reason gives the run up with OwnershipLostError naming the step", async () => {
    const store = memoryStore();
    const lease = await store.acquire("r", { owner: "a", leaseMs: 60_000 });
    const counted = renewals(store);
    counted.fail = new Error("connection refused");
    const c = clock(0);
    const held = holdLease(counted.store, lease, { leaseMs: 2000, sentAt: 0, now: c.now });
    c.set(4500);
    const error = await held.confirm("h#turn:0:tool:0")?.catch((e: unknown) => e);
    expect(isOwnershipLostError(error)).toBe(true);
    const lost = error as OwnershipLostError;
    expect(lost.message).toContain("step h#turn:0:tool:0 was not started");
    expect(lost.message).toContain("last confirmed 4500 ms ago");
    expect(lost.message).toContain("connection refused");
    expect(lost.cause).toBe(counted.fail);
  });
});

describe("no effect once the lease may have lapsed", () => {
  it("does not call the tool when its lease may have lapsed and the renewal is refused (taken over)", async () => {
    const store = memoryStore();
    const lease = await store.acquire("r1", { owner: "paused", leaseMs: 1 });
    const c = clock(0);
    const counted = renewals(store);
    const { loop, effects, journal } = loopWithPause(counted.store, async () => {
      c.set(4500); // paused 4.5 s after the tool's frame.started, with a 2 s lease
      await new Promise((r) => setTimeout(r, 5));
      await store.acquire("r1", { owner: "successor", leaseMs: 60_000 }); // its lease ran out: taken over
    });
    const held = holdLease(counted.store, lease, { leaseMs: 2000, sentAt: 0, now: c.now });
    const error = await loop.run({ runId: "r1", journal, input: "go", ownership: { lease: held } }).catch((e) => e);
    expect(isOwnershipLostError(error)).toBe(true);
    expect(effects).toEqual(["model:0"]); // the tool was never called
    expect(counted.calls).toBe(1);
    const entries = await readJournal(journal, "r1");
    expect(entries.at(-1)).toMatchObject({ type: "frame.started", data: { frameId: "h#turn:0:tool:0" } });
  });

  it("calls the tool once a renewal proved the lease, and renews nothing while it is fresh", async () => {
    const store = memoryStore();
    const lease = await store.acquire("r2", { owner: "paused", leaseMs: 60_000 });
    const c = clock(0);
    const counted = renewals(store);
    const { loop, effects, journal } = loopWithPause(counted.store, () => {
      c.set(4500); // paused past the lease, but nobody took the run over
    });
    const held = holdLease(counted.store, lease, { leaseMs: 2000, sentAt: 0, now: c.now });
    const out = await loop.run({ runId: "r2", journal, input: "go", ownership: { lease: held } });
    expect(out.content).toBe("ok");
    expect(effects).toEqual(["model:0", "h#turn:0:tool:0", "model:1"]);
    expect(counted.calls).toBe(1); // before the tool only: the next model call found the lease fresh
  });

  it("a loop.run paused (event loop blocked) past its own lease after a tool's start calls no tool once another caller took the run", async () => {
    const store = memoryStore();
    const { loop, effects, journal } = loopWithPause(store, async () => {
      const until = Date.now() + 400; // the process stalls 400 ms: no timer (no renewal) runs meanwhile
      while (Date.now() < until) {}
      await store.acquire("r3", { owner: "successor", leaseMs: 60_000 }); // the 300 ms lease ran out
    });
    const error = await loop.run({ runId: "r3", journal, input: "go", ownership: { leaseMs: 300 } }).catch((e) => e);
    expect(isOwnershipLostError(error)).toBe(true);
    expect(effects).toEqual(["model:0"]);
  });
});

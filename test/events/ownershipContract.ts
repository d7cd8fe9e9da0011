import { hostname } from "node:os";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  isOwnershipLostError,
  isRunBusyError,
  isRunCancelledError,
  OwnershipLostError,
  RunBusyError,
} from "../../src/core/errors.ts";
import type { EventStore } from "../../src/events/store.ts";
import { decision, runStarted } from "./entries.ts";
import type { StoreFixture } from "./storeContract.ts";

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("expected the promise to reject");
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The ownership half of the EventStore contract (acquire, renew, release, fenced appends), run
 * by storeContract for every adapter. Takeover of a crashed process is tested with real
 * processes (test/reliability/ownership.test.ts); here the holder is always this live process.
 */
export function ownershipContract(name: string, open: () => Promise<StoreFixture>): void {
  describe(`EventStore contract, run ownership: ${name}`, () => {
    let fixture: StoreFixture;
    let store: EventStore;
    beforeEach(async () => {
      fixture = await open();
      store = fixture.store;
    });
    afterEach(async () => {
      await store.close();
      await fixture.cleanup?.();
    });

    it("gives a run to one owner at a time: a second caller gets RunBusyError naming the holder", async () => {
      const before = Date.now();
      const lease = await store.acquire("r1", { owner: "first", leaseMs: 60_000 });
      expect(lease).toMatchObject({ runId: "r1", owner: "first", host: hostname(), pid: process.pid, token: 1 });
      expect(lease.expiresAt).toBeGreaterThanOrEqual(before + 60_000 - 1_000); // the store's clock, near ours
      const busy = await rejection(store.acquire("r1", { owner: "second", leaseMs: 60_000 }));
      expect(busy).toBeInstanceOf(RunBusyError);
      expect(isRunBusyError(busy)).toBe(true);
      expect(busy).toMatchObject({
        code: "runBusy",
        runId: "r1",
        holder: { owner: "first", token: 1, pid: process.pid },
      });
      expect((busy as RunBusyError).retryAfterMs).toBeGreaterThan(50_000);
      expect((busy as Error).message).toContain("run r1 is being run by first");
      // Other runs are not held.
      expect((await store.acquire("r2", { owner: "second", leaseMs: 60_000 })).token).toBe(1);
    });

    it("hands the run on after a release or once the lease ran out, with a token one higher each time", async () => {
      const first = await store.acquire("r1", { owner: "a", leaseMs: 60_000 });
      await store.release(first);
      const second = await store.acquire("r1", { owner: "b", leaseMs: 30 });
      expect(second.token).toBe(2);
      await sleep(60);
      const third = await store.acquire("r1", { owner: "c", leaseMs: 60_000 });
      expect(third).toMatchObject({ owner: "c", token: 3 });
      // A stale holder's release and renewal change nothing.
      await store.release(second);
      expect(isRunBusyError(await rejection(store.acquire("r1", { owner: "d", leaseMs: 1_000 })))).toBe(true);
      const renewal = await rejection(store.renew(second, 60_000));
      expect(renewal).toBeInstanceOf(OwnershipLostError);
      expect(renewal).toMatchObject({ code: "ownershipLost", runId: "r1", token: 2, holder: { owner: "c", token: 3 } });
    });

    it("tells a run's live holder, and none for a run never owned, released, or whose lease ran out", async () => {
      expect(store.holder).toBeTypeOf("function");
      const holder = (runId: string) => store.holder?.(runId);
      expect(await holder("h1")).toBeUndefined();
      const lease = await store.acquire("h1", { owner: "worker 7", leaseMs: 60_000 });
      expect(await holder("h1")).toMatchObject({ owner: "worker 7", token: 1, pid: process.pid, host: hostname() });
      await store.release(lease);
      expect(await holder("h1")).toBeUndefined();
      await store.acquire("h1", { owner: "short", leaseMs: 20 });
      expect(await holder("h1")).toMatchObject({ owner: "short", token: 2 });
      await sleep(40);
      expect(await holder("h1")).toBeUndefined(); // lapsed: what a crashed owner leaves
      expect(await holder("h2")).toBeUndefined(); // another run is not held
    });

    it("renews a lease it still holds, pushing its expiry out", async () => {
      const lease = await store.acquire("r1", { owner: "a", leaseMs: 50 });
      const renewed = await store.renew(lease, 60_000);
      expect(renewed).toMatchObject({ runId: "r1", owner: "a", token: 1 });
      expect(renewed.expiresAt).toBeGreaterThan(lease.expiresAt + 50_000);
      await sleep(80);
      expect(isRunBusyError(await rejection(store.acquire("r1", { owner: "b", leaseMs: 1_000 })))).toBe(true);
    });

    it("appends with a fence only while that lease owns the run: a stale token is refused and writes nothing", async () => {
      const old = await store.acquire("r1", { owner: "old", leaseMs: 20 });
      await store.append("r1", [runStarted()], { expectedVersion: 0, fence: old.token });
      await sleep(40);
      const current = await store.acquire("r1", { owner: "new", leaseMs: 60_000 });
      // Even at the right version, the old owner's append is refused.
      const refused = await rejection(
        store.append("r1", [decision("late", 1)], { expectedVersion: 1, fence: old.token }),
      );
      expect(isOwnershipLostError(refused)).toBe(true);
      expect(refused).toMatchObject({
        code: "ownershipLost",
        runId: "r1",
        token: 1,
        holder: { owner: "new", token: 2 },
      });
      expect((await store.read("r1")).length).toBe(1);
      expect(await store.append("r1", [decision("d", 2)], { expectedVersion: 1, fence: current.token })).toEqual({
        version: 2,
      });
      // Unfenced appends (a submitter, a tool of the operator) are not held to ownership.
      expect(await store.append("r1", [decision("e", 3)], { expectedVersion: 2 })).toEqual({ version: 3 });
      // After a release no fence passes, not even the last holder's.
      await store.release(current);
      const afterRelease = await rejection(
        store.append("r1", [decision("f", 4)], { expectedVersion: 3, fence: current.token }),
      );
      expect(afterRelease).toMatchObject({ code: "ownershipLost", holder: undefined });
      // A fence on a run nobody ever owned is refused too.
      expect(
        isOwnershipLostError(await rejection(store.append("r9", [runStarted()], { expectedVersion: 0, fence: 1 }))),
      ).toBe(true);
      expect(await store.read("r9")).toEqual([]);
    });

    it("a cancel request reaches the owner: its lease says so, and only the append ending the run passes", async () => {
      const lease = await store.acquire("c1", { owner: "loop", leaseMs: 60_000 });
      expect(lease.cancelRequested).toBeUndefined();
      await store.append("c1", [runStarted()], { expectedVersion: 0, fence: lease.token });
      const asked = await store.requestCancel("c1", "operator said stop");
      expect(asked.holder).toMatchObject({ owner: "loop", token: lease.token });
      // A second request keeps the first reason.
      await store.requestCancel("c1", "again");
      expect((await store.renew(lease, 60_000)).cancelRequested).toBe("operator said stop");
      const refused = await rejection(
        store.append("c1", [decision("d", 1)], { expectedVersion: 1, fence: lease.token }),
      );
      expect(isRunCancelledError(refused)).toBe(true);
      expect(refused).toMatchObject({ code: "runCancelled", runId: "c1", reason: "operator said stop" });
      expect((await store.read("c1")).length).toBe(1);
      const end = { type: "run.cancelled", data: { reason: "operator said stop" } } as const;
      expect(await store.append("c1", [decision("d", 1), end], { expectedVersion: 1, fence: lease.token })).toEqual({
        version: 3,
      });
      // Unfenced appends (compaction's marker, a submitter) are not held to it.
      await store.release(lease);
      // A run nobody holds: no holder, and the next owner's lease carries the request.
      expect((await store.requestCancel("c2", "nobody runs it")).holder).toBeUndefined();
      expect((await store.acquire("c2", { owner: "x", leaseMs: 60_000 })).cancelRequested).toBe("nobody runs it");
      expect((await store.acquire("c3", { owner: "x", leaseMs: 60_000 })).cancelRequested).toBeUndefined();
    });
  });
}

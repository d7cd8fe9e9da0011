import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/core/digest.ts";
import type { EventStore, StoredSnapshot } from "../../src/events/store.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { readRunState, writeRunSnapshot } from "../../src/runtime/base/snapshots.ts";
import { runStarted } from "./entries.ts";
import type { StoreFixture } from "./storeContract.ts";

const snapshot = (seq: number, body = `{"seq":${seq}}`): StoredSnapshot => ({ seq, digest: sha256Hex(body), body });

/**
 * What every store that keeps snapshots does (`writeSnapshot` / `latestSnapshot`): one latest
 * snapshot per run, never replaced by an older one, kept apart from the entries.
 */
export function snapshotContract(name: string, open: () => Promise<StoreFixture>): void {
  describe(`EventStore snapshots: ${name}`, () => {
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

    it("keeps the latest snapshot of each run, as written", async () => {
      expect(store.writeSnapshot).toBeTypeOf("function");
      expect(await store.latestSnapshot?.("r1")).toBeUndefined();
      await store.writeSnapshot?.("r1", snapshot(4));
      await store.writeSnapshot?.("r2", snapshot(9, '{"other":"run"}'));
      expect(await store.latestSnapshot?.("r1")).toEqual(snapshot(4));
      await store.writeSnapshot?.("r1", snapshot(12));
      expect(await store.latestSnapshot?.("r1")).toEqual(snapshot(12));
      expect(await store.latestSnapshot?.("r2")).toEqual(snapshot(9, '{"other":"run"}'));
    });

    it("never goes back to an older snapshot (a slow writer's)", async () => {
      await store.writeSnapshot?.("r1", snapshot(12));
      await store.writeSnapshot?.("r1", snapshot(8));
      await store.writeSnapshot?.("r1", snapshot(12, '{"again":true}'));
      expect(await store.latestSnapshot?.("r1")).toEqual(snapshot(12));
    });

    it("changes no entry, and a read folds from the snapshot to the same state", async () => {
      await store.append("r1", [runStarted()], { expectedVersion: 0 });
      const journal = { store };
      expect(await writeRunSnapshot(journal, "r1")).toBe(1);
      const before = JSON.stringify(await store.read("r1"));
      expect((await store.listRuns()).map((r) => [r.runId, r.version, r.entries])).toEqual([["r1", 1, 1]]);
      expect(JSON.stringify(await store.read("r1"))).toBe(before);
      const read = await readRunState(journal, "r1");
      expect(read).toMatchObject({ snapshotSeq: 1, tail: 0 });
      expect(JSON.stringify(read.state)).toBe(JSON.stringify(foldEntries((await store.read("r1")) as never)));
    });
  });
}

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  ConcurrencyError,
  isAgentLoopConfigError,
  isConcurrencyError,
  isJournalFormatError,
} from "../../src/core/errors.ts";
import type { CompactRequest, EventStore } from "../../src/events/store.ts";
import { type NewEntry, SCHEMA_VERSION } from "../../src/events/types.ts";
import { validateEntries } from "../../src/events/validate.ts";
import { decision, frameCompleted, frameStarted, runCompleted, runStarted } from "./entries.ts";
import { ownershipContract } from "./ownershipContract.ts";

/** What an adapter's test file gives the contract: a fresh, empty store, and how to clean up after it. */
export interface StoreFixture {
  readonly store: EventStore;
  readonly cleanup?: () => Promise<void>;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("expected the promise to reject");
}

/** Ids every store refuses: a lone surrogate (which UTF-8 cannot hold), NUL and other controls, too long. */
export const INVALID_RUN_IDS: readonly string[] = [
  "a\ud800",
  "a\udbff",
  "\udc00b",
  "a\u0000b",
  "tab\there",
  "line\nbreak",
  "del\u007f",
  "c1\u0085",
  "",
  "x".repeat(513),
  "é".repeat(257), // 514 UTF-8 bytes in 257 characters
];

/** Ids every store keeps apart and hands back exactly (the first two are what PostgreSQL merged lone surrogates into). */
export const VALID_RUN_IDS: readonly string[] = [
  "a\ufffd",
  "a\u{1f600}",
  "x".repeat(512),
  "\u{1f600}".repeat(128), // 512 UTF-8 bytes
  "ünï-cødé 日本 run/1:#?",
];

const archivedMarker: CompactRequest["marker"] = {
  type: "frames.archived",
  data: { frameIds: [], archiveRef: `sha256:${"a".repeat(64)}`, digests: {}, seqs: [] },
};

/**
 * The EventStore contract: every adapter's test file calls it with a factory of fresh stores
 * (memory, sqlite, and postgres later). Adapter-neutral: it uses only the SPI.
 */
export function storeContract(name: string, open: () => Promise<StoreFixture>): void {
  describe(`EventStore contract: ${name}`, () => {
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

    it("numbers appended entries from 1, in order, with the schema version and the time in meta", async () => {
      expect(await store.append("r1", [runStarted(), decision("d1", 1)], { expectedVersion: 0 })).toEqual({
        version: 2,
      });
      expect(await store.append("r1", [decision("d2", 2)], { expectedVersion: 2 })).toEqual({ version: 3 });
      const entries = await store.read("r1");
      expect(entries.map((e) => [e.runId, e.seq, e.type])).toEqual([
        ["r1", 1, "run.started"],
        ["r1", 2, "decision.recorded"],
        ["r1", 3, "decision.recorded"],
      ]);
      for (const e of entries) {
        expect(e.meta.v).toBe(SCHEMA_VERSION);
        expect(new Date(e.meta.at).toISOString()).toBe(e.meta.at);
      }
      expect(Object.keys(entries[0]!)).toEqual(["runId", "seq", "type", "data", "meta"]);
    });

    it("watch (when the store has it) says read again after an append to the run, and stops once removed", async () => {
      if (store.watch === undefined) return; // optional: followRun polls a store without it
      let woken = 0;
      const stop = store.watch("w1", () => woken++);
      const wokenFor = async (min: number) => {
        for (let waited = 0; woken < min && waited < 5000; waited += 10) await new Promise((r) => setTimeout(r, 10));
        return woken;
      };
      await new Promise((r) => setTimeout(r, 100)); // a listener over the network is connected by then
      const before = woken; // a connecting listener may wake its watchers once: that is allowed
      await store.append("w1", [runStarted()], { expectedVersion: 0 });
      expect(await wokenFor(before + 1)).toBeGreaterThan(before);
      stop();
      await new Promise((r) => setTimeout(r, 50));
      const after = woken;
      await store.append("w1", [decision("d1", 1)], { expectedVersion: 1 });
      await new Promise((r) => setTimeout(r, 100));
      expect(woken).toBe(after);
    });

    it("refuses an append at a stale expectedVersion with ConcurrencyError carrying expected and actual", async () => {
      await store.append("r1", [runStarted(), decision("d1", 1), decision("d2", 2)], { expectedVersion: 0 });
      const behind = await rejection(store.append("r1", [decision("late", 0)], { expectedVersion: 1 }));
      expect(behind).toBeInstanceOf(ConcurrencyError);
      expect(behind).toMatchObject({ code: "concurrency", runId: "r1", expected: 1, actual: 3 });
      expect(await rejection(store.append("r1", [decision("ahead", 0)], { expectedVersion: 7 }))).toMatchObject({
        expected: 7,
        actual: 3,
      });
      expect(await rejection(store.append("new", [runStarted()], { expectedVersion: 2 }))).toMatchObject({
        expected: 2,
        actual: 0,
      });
      expect((await store.read("r1")).length).toBe(3);
      expect(await store.read("new")).toEqual([]);
    });

    it("appends nothing of a batch whose middle entry has no JSON form, or is not a journal entry", async () => {
      await store.append("r1", [runStarted()], { expectedVersion: 0 });
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      const bad: NewEntry[][] = [
        [frameStarted("l#turn:0:tool:0"), frameCompleted("l#turn:0:tool:0", { n: 10n }), decision("after", 1)],
        [decision("a", 1), frameCompleted("x", cyclic), decision("b", 2)],
        [decision("a", 1), { type: "frame.exploded", data: {} } as unknown as NewEntry, decision("b", 2)],
        [decision("a", 1), { type: "frame.started", data: { frameId: 7 } } as unknown as NewEntry],
      ];
      for (const batch of bad) {
        const e = await rejection(store.append("r1", batch, { expectedVersion: 1 }));
        expect(isJournalFormatError(e), String(e)).toBe(true);
        expect(e).toMatchObject({ runId: "r1" });
      }
      expect((await store.read("r1")).map((e) => e.seq)).toEqual([1]);
      expect(await store.append("r1", [decision("ok", 1)], { expectedVersion: 1 })).toEqual({ version: 2 });
    });

    it("reads from a seq, and reads nothing of an unknown run or past the end", async () => {
      await store.append("r1", [runStarted(), ...Array.from({ length: 9 }, (_, i) => decision(`d${i}`, i))], {
        expectedVersion: 0,
      });
      expect((await store.read("r1", { from: 7 })).map((e) => e.seq)).toEqual([7, 8, 9, 10]);
      expect((await store.read("r1", { from: 1 })).length).toBe(10);
      expect(await store.read("r1", { from: 11 })).toEqual([]);
      expect(await store.read("nobody")).toEqual([]);
    });

    it("hands back the JSON form of what was appended: key order, unicode, Date as string, Map as {}", async () => {
      const output = {
        zeta: 1,
        alpha: { y: [1, "two", null, { b: true, a: false }], x: -0 },
        text: 'é 日本語 🎉 \u2028 \u0000 "quoted" \\',
        when: new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6)),
        map: new Map([["k", 1]]),
        dropped: undefined,
        big: 1e21,
        small: 5e-324,
      };
      await store.append("r1", [frameStarted("l#turn:0:tool:0"), frameCompleted("l#turn:0:tool:0", output)], {
        expectedVersion: 0,
      });
      const [, completed] = await store.read("r1");
      const data = completed!.data as { output: Record<string, unknown> };
      expect(JSON.stringify(data.output)).toBe(JSON.stringify(output));
      expect(Object.keys(data.output)).toEqual(["zeta", "alpha", "text", "when", "map", "big", "small"]);
      expect(data.output.when).toBe("2024-01-02T03:04:05.006Z");
      expect(data.output.map).toEqual({});
      expect(data.output.text).toBe(output.text);
      expect(Object.is((data.output.alpha as { x: number }).x, 0)).toBe(true);
    });

    it("does not let the caller's objects, or a reader's changes, alter what is stored", async () => {
      const output = { list: [1, 2] };
      await store.append("r1", [frameStarted("f"), frameCompleted("f", output)], { expectedVersion: 0 });
      output.list.push(3);
      const first = (await store.read("r1"))[1]!.data as { output: { list: number[] } };
      try {
        first.output.list.push(4);
      } catch {
        // a store may hand out frozen entries
      }
      const again = (await store.read("r1"))[1]!.data as { output: { list: number[] } };
      expect(again.output.list).toEqual([1, 2]);
    });

    it("keeps runs apart and lists them with version, last type and entry count", async () => {
      await store.append("b-run", [runStarted(), runCompleted()], { expectedVersion: 0 });
      await store.append("a-run", [runStarted()], { expectedVersion: 0 });
      expect((await store.read("a-run")).length).toBe(1);
      expect(await store.listRuns()).toEqual([
        { runId: "a-run", version: 1, lastType: "run.started", entries: 1 },
        { runId: "b-run", version: 2, lastType: "run.completed", entries: 2 },
      ]);
    });

    it("lists the runs under a run id prefix, and only those (listRuns({ prefix }))", async () => {
      const ids = ["t", "t/a", "t/b/c", "t0", "t.x", "s/a", "tt/a", "t/\u{1F600}", "t/\uFFFF", "u"];
      for (const runId of ids) await store.append(runId, [runStarted()], { expectedVersion: 0 });
      await store.append("t/a", [runCompleted()], { expectedVersion: 1 });
      // (A store outside Loom may ignore the option and list every run: callers filter by the prefix.)
      const under = async (prefix: string) => (await store.listRuns({ prefix })).map((r) => r.runId);
      // Sorted here: memory sorts UTF-16 units, SQL stores code points (U+FFFF before U+1F600).
      expect((await under("t/")).sort()).toEqual(["t/a", "t/b/c", "t/\u{1F600}", "t/\uFFFF"].sort());
      expect(await under("t/b/")).toEqual(["t/b/c"]);
      expect(await under("t/\u{1F600}")).toEqual(["t/\u{1F600}"]);
      expect(await under("nothing/")).toEqual([]);
      const [a] = await store.listRuns({ prefix: "t/a" });
      expect(a).toEqual({ runId: "t/a", version: 2, lastType: "run.completed", entries: 2 });
      expect((await store.listRuns({ prefix: "" })).length).toBe(ids.length);
    });

    describe("compaction", () => {
      const marker = (removeSeqs: number[], expectedVersion: number): CompactRequest => ({
        removeSeqs,
        expectedVersion,
        marker: {
          type: "frames.archived",
          data: {
            frameIds: ["l#turn:0:tool:0"],
            archiveRef: `sha256:${"a".repeat(64)}`,
            digests: { "l#turn:0:tool:0": { digest: "b".repeat(64), bytes: 9 } },
            seqs: removeSeqs,
          },
        },
      });
      beforeEach(async () => {
        await store.append(
          "r1",
          [
            runStarted(),
            frameStarted("l#turn:0:tool:0"),
            frameCompleted("l#turn:0:tool:0", { n: 1 }),
            decision("d", 1),
          ],
          { expectedVersion: 0 },
        );
      });

      it("removes the archived entries and appends the marker at the end, in one step", async () => {
        expect(await store.compact("r1", marker([2, 3], 4))).toEqual({ version: 5 });
        const entries = await store.read("r1");
        expect(entries.map((e) => [e.seq, e.type])).toEqual([
          [1, "run.started"],
          [4, "decision.recorded"],
          [5, "frames.archived"],
        ]);
        validateEntries("r1", entries);
        expect((await store.read("r1", { from: 2 })).map((e) => e.seq)).toEqual([4, 5]);
        expect(await store.listRuns()).toEqual([{ runId: "r1", version: 5, lastType: "frames.archived", entries: 3 }]);
        expect(await store.append("r1", [decision("next", 2)], { expectedVersion: 5 })).toEqual({ version: 6 });
      });

      it("changes nothing when the stream moved, a seq is not there, or the marker is malformed", async () => {
        const before = await store.read("r1");
        const stale = await rejection(store.compact("r1", marker([2, 3], 3)));
        expect(isConcurrencyError(stale)).toBe(true);
        expect(stale).toMatchObject({ expected: 3, actual: 4 });
        expect(isJournalFormatError(await rejection(store.compact("r1", marker([2, 3, 9], 4))))).toBe(true);
        const broken = marker([2, 3], 4);
        const malformed = { ...broken, marker: { ...broken.marker, data: { ...broken.marker.data, digests: {} } } };
        expect(isJournalFormatError(await rejection(store.compact("r1", malformed)))).toBe(true);
        expect(await store.read("r1")).toEqual(before);
      });
    });

    it("refuses an invalid run id on append, read and compact (AgentLoopConfigError invalidRunId) and stores nothing", async () => {
      for (const runId of INVALID_RUN_IDS) {
        const refusals = [
          await rejection(store.append(runId, [runStarted()], { expectedVersion: 0 })),
          await rejection(store.read(runId)),
          await rejection(store.compact(runId, { removeSeqs: [], expectedVersion: 0, marker: archivedMarker })),
        ];
        for (const e of refusals) {
          expect(isAgentLoopConfigError(e), `${JSON.stringify(runId)}: ${String(e)}`).toBe(true);
          expect(e).toMatchObject({ code: "invalidRunId", message: expect.stringContaining("not a valid run id") });
        }
      }
      expect(await store.listRuns()).toEqual([]);
    });

    it("keeps every valid run id apart, as written: replacement characters, astral code points, 512 UTF-8 bytes", async () => {
      for (const [i, runId] of VALID_RUN_IDS.entries()) {
        await store.append(runId, [runStarted(`loop-${i}`)], { expectedVersion: 0 });
      }
      for (const [i, runId] of VALID_RUN_IDS.entries()) {
        const [entry] = await store.read(runId);
        expect(entry).toMatchObject({ runId, data: { loopId: `loop-${i}` } });
      }
      expect((await store.listRuns()).map((r) => r.runId).sort()).toEqual([...VALID_RUN_IDS].sort());
    });

    it("holds 100,000 entries in one run and reads them back in order", async () => {
      const total = 100_000;
      const batch = 2_000;
      let version = 0;
      for (let start = 0; start < total; start += batch) {
        const entries = Array.from({ length: batch }, (_, i) => decision(`d${start + i}`, start + i));
        ({ version } = await store.append("big", entries, { expectedVersion: version }));
      }
      expect(version).toBe(total);
      const all = await store.read("big");
      expect(all.length).toBe(total);
      validateEntries("big", all);
      expect(all[total - 1]).toMatchObject({ seq: total, data: { decisionId: `d${total - 1}`, choice: total - 1 } });
      expect((await store.read("big", { from: total - 4 })).map((e) => e.seq)).toEqual([
        total - 4,
        total - 3,
        total - 2,
        total - 1,
        total,
      ]);
    });
  });
  ownershipContract(name, open);
}

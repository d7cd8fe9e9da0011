import { afterAll, describe, expect, it } from "vitest";
import { LONG_LOOP, longRunEntries, longRunTemplate } from "../../bench/longRun.ts";
import { memoryArchive } from "../../src/events/archive.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, type OpenJournal, openSqliteJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { NewEntry } from "../../src/events/types.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { readRunRows } from "../../src/read/runRow.ts";
import { showStep } from "../../src/read/step.ts";
import { writeRunSnapshot } from "../../src/runtime/base/snapshots.ts";
import { listPendingApprovals } from "../../src/runtime/control/approvals.ts";
import { runRows } from "../../src/viewer/runsPage.ts";
import { tempDir } from "../events/tmp.ts";
import { dropSchema, freshSchema, PG_URL } from "../postgres/pg.ts";

const tmp = tempDir("loom-snapshot-reads-");
const schemas: string[] = [];
afterAll(async () => {
  tmp.remove();
  for (const s of schemas) await dropSchema(s);
});

const RUN = "long";
const TURNS = 2000;
/** Entries appended after the snapshot. */
const TAIL = 7;

/** The store without its snapshot methods: every read reads every entry (today's answers). */
function withoutSnapshots(journal: Journal): Journal {
  const { writeSnapshot: _w, latestSnapshot: _l, ...store } = journal.store;
  return { ...journal, store: store as EventStore };
}

/** The journal, counting the entries its store returns for `RUN`. */
function counting(journal: Journal): { journal: Journal; read: () => number } {
  let n = 0;
  const inner = journal.store;
  const store: EventStore = {
    ...inner,
    read: async (runId, options) => {
      const entries = await inner.read(runId, options);
      if (runId === RUN) n += entries.length;
      return entries;
    },
  };
  return { journal: { ...journal, store }, read: () => n };
}

/**
 * A long run of `TURNS` lookup turns that then asks for one more call and stops for its approval:
 * the loop's own entries (bench/longRun.ts), its last turn's model call naming a call that waits.
 */
async function approvalRun(): Promise<NewEntry[]> {
  const entries = [...longRunEntries(await longRunTemplate(), TURNS, "interrupted")];
  entries.pop(); // the aborted interruption
  const frameId = `${LONG_LOOP}#turn:${TURNS}:model`;
  const stepId = `${LONG_LOOP}#turn:${TURNS}:tool:0`;
  const started = entries.at(-4) as Extract<NewEntry, { type: "frame.started" }>;
  entries.push(
    { type: "frame.started", data: { frameId, effect: "model", inputDigest: started.data.inputDigest } },
    {
      type: "frame.completed",
      data: { frameId, output: { toolCalls: [{ id: "last", name: "lookup", input: { n: TURNS } }] } },
    },
    { type: "run.interrupted", data: { reason: "approval-pending", detail: { stepIds: [stepId] } } },
  );
  return entries;
}

/** Writes `entries` with a snapshot `TAIL` entries before the end (or none). */
async function write(journal: Journal, entries: NewEntry[], snapshot: "compact" | "full" | "none"): Promise<number> {
  const cut = entries.length - TAIL;
  let version = 0;
  const append = async (batch: NewEntry[]) => {
    version = (await journal.store.append(RUN, batch, { expectedVersion: version })).version;
  };
  for (let i = 0; i < cut; i += 4000) await append(entries.slice(i, Math.min(i + 4000, cut)));
  const seq = snapshot === "none" ? 0 : await writeRunSnapshot(journal, RUN, { compact: snapshot === "compact" });
  await append(entries.slice(cut));
  return seq ?? 0;
}

let files = 0;
const stores: [string, () => OpenJournal][] = [
  ["memory", () => createJournal({ store: memoryStore({ json: true }), archive: memoryArchive() })],
  ["SQLite", () => openSqliteJournal(tmp.file(`reads-${++files}.db`))],
  // With LOOM_PG_URL only: no PostgreSQL server to read from without it.
  ...(PG_URL === undefined
    ? []
    : [
        [
          "PostgreSQL",
          () => {
            const schema = freshSchema("snapreads");
            schemas.push(schema);
            return openPostgresJournal(PG_URL as string, { schema });
          },
        ] as [string, () => OpenJournal],
      ]),
];

describe.each(stores)("reads from a snapshot plus its tail (%s)", (_name, open) => {
  for (const kind of ["compact", "full"] as const) {
    it(`a ${TURNS}-turn run's row, pending approvals and a late step read only the tail after a ${kind} snapshot, and equal a full read's`, async () => {
      const journal = open();
      try {
        const entries = await approvalRun();
        const seq = await write(journal, entries, kind);
        expect(seq).toBe(entries.length - TAIL);
        const full = withoutSnapshots(journal);

        const rows = counting(journal);
        const row = await readRunRows(rows.journal);
        expect(row.rows).toEqual((await readRunRows(full)).rows);
        expect(row.rows[0]).toMatchObject({
          entries: entries.length,
          iterations: TURNS + 1,
          activity: "waiting-for-approval",
        });
        // The tail twice at most (the row, then its pending approvals): never the run.
        expect(rows.read()).toBeLessThanOrEqual(2 * (TAIL + 1));
        expect(await runRows(journal)).toEqual(await runRows(full));

        const approvals = counting(journal);
        const pending = await listPendingApprovals(approvals.journal);
        expect(pending).toEqual(await listPendingApprovals(full));
        expect(pending.map((p) => p.stepId)).toEqual([`${LONG_LOOP}#turn:${TURNS}:tool:0`]);
        expect(approvals.read()).toBeLessThanOrEqual(TAIL + 1);

        // Turn TURNS - 2: the next model call's prompt digest (turn TURNS - 1, the loop's own) vouches for it.
        const late = `${LONG_LOOP}#turn:${TURNS - 2}:tool:0`;
        const steps = counting(journal);
        const shown = await showStep(steps.journal, late, RUN);
        expect(shown).toEqual(await showStep(full, late, RUN));
        expect(shown.verified).toHaveLength(2);
        expect(steps.read()).toBeLessThanOrEqual(2 * (TAIL + 1));

        // A step below a compact snapshot's frames reads the run, and says what a full read says.
        const early = `${LONG_LOOP}#turn:3:tool:0`;
        expect(await showStep(journal, early, RUN)).toEqual(await showStep(full, early, RUN));
      } finally {
        await journal.close();
      }
    });
  }

  it("a snapshot written before facts reads every entry for the row, until the next snapshot has them", async () => {
    const journal = open();
    try {
      const entries = [...longRunEntries(await longRunTemplate(), 50, "interrupted")];
      await write(journal, entries, "none");
      // A snapshot as older Loom wrote it: no facts in its body.
      const { runSnapshotOf } = await import("../../src/projections/runSnapshot.ts");
      const { foldEntries } = await import("../../src/projections/runState.ts");
      const stored = (await journal.store.read(RUN)).slice(0, -5);
      const last = stored.at(-1);
      if (last === undefined) throw new Error("no entries");
      await journal.store.writeSnapshot?.(RUN, runSnapshotOf(foldEntries(stored), last));
      const reads = counting(journal);
      const { rows } = await readRunRows(reads.journal);
      expect(rows).toEqual((await readRunRows(withoutSnapshots(journal))).rows);
      expect(reads.read()).toBeGreaterThanOrEqual(entries.length);
      // The next snapshot written reads every entry once, and has facts again.
      await writeRunSnapshot(journal, RUN);
      const again = counting(journal);
      expect((await readRunRows(again.journal)).rows).toEqual(rows);
      expect(again.read()).toBeLessThanOrEqual(1);
    } finally {
      await journal.close();
    }
  });

  it("a compaction after the snapshot (entries it counted removed) reads every entry for the row, and says what a full read says", async () => {
    const journal = open();
    try {
      const entries = [...longRunEntries(await longRunTemplate(), 60, "interrupted")];
      await write(journal, entries, "full");
      await compact(journal, RUN, { keepTurns: 5 }); // frames before the snapshot go to the archive
      const reads = counting(journal);
      const { rows } = await readRunRows(reads.journal);
      const expected = (await readRunRows(withoutSnapshots(journal))).rows;
      expect(rows).toEqual(expected);
      expect(rows[0]?.entries).toBeLessThan(entries.length);
      expect(reads.read()).toBeGreaterThanOrEqual(rows[0]?.entries ?? 0);
    } finally {
      await journal.close();
    }
  });
});

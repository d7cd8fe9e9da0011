import { afterAll, describe, expect, it } from "vitest";
import { longRunLoop, longRunTemplate, writeLongRun } from "../../bench/longRun.ts";
import { readJournal } from "../../src/events/journal.ts";
import { pruneRuns } from "../../src/events/prune.ts";
import { openPostgresJournal, POSTGRES_SCHEMA_VERSION, postgresStore } from "../../src/postgres.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { readRunState, writeRunSnapshot } from "../../src/runtime/base/snapshots.ts";
import { snapshotContract } from "../events/snapshotContract.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "./pg.ts";

// Skipped without LOOM_PG_URL: there is no PostgreSQL server to keep snapshots in.
describe.skipIf(PG_URL === undefined)("postgres snapshots", () => {
  const url = PG_URL as string;
  const schemas: string[] = [];
  afterAll(async () => {
    for (const s of schemas) await dropSchema(s);
  });

  snapshotContract("postgres", async () => {
    const schema = freshSchema("snapshots");
    const store = postgresStore(url, { schema });
    await store.ready();
    return { store, cleanup: () => dropSchema(schema).then(() => {}) };
  });

  it("a run resumed from a snapshot on PostgreSQL journals what one folded in full does", async () => {
    const schema = freshSchema("snapresume");
    schemas.push(schema);
    const journal = openPostgresJournal(url, { schema });
    try {
      const template = await longRunTemplate();
      for (const runId of ["with", "without"]) await writeLongRun(journal.store, runId, template, 300, "interrupted");
      const seq = await writeRunSnapshot(journal, "with");
      expect(await readRunState(journal, "with")).toMatchObject({ snapshotSeq: seq, tail: 0 });
      const a = await longRunLoop(300, { snapshots: { every: 100 } }).run({ runId: "with", journal });
      const b = await longRunLoop(300).run({ runId: "without", journal });
      expect(JSON.stringify(a)).toBe(JSON.stringify(b));
      const facts = (runId: string) =>
        readJournal(journal, runId).then((es) => JSON.stringify(es.map((e) => [e.seq, e.type, e.data])));
      expect(await facts("with")).toBe(await facts("without"));
      const state = (await readRunState(journal, "with")).state;
      expect(JSON.stringify(state.frames)).toBe(JSON.stringify(foldEntries(await readJournal(journal, "with")).frames));
    } finally {
      await journal.close();
    }
  });

  it("a version 4 database gets the snapshot table when opened (version 5), its runs unchanged", async () => {
    const schema = freshSchema("snapv4");
    schemas.push(schema);
    const store = postgresStore(url, { schema });
    await writeLongRun(store, "old", await longRunTemplate(), 2, "completed");
    await store.close();
    await sql(`DROP TABLE "${schema}".loom_snapshots`);
    await sql(`UPDATE "${schema}".loom_meta SET value = '4' WHERE key = 'schema_version'`);
    const reopened = openPostgresJournal(url, { schema });
    try {
      expect(POSTGRES_SCHEMA_VERSION).toBe(6);
      expect(await readRunState(reopened, "old")).toMatchObject({ snapshotSeq: 0, tail: 12 });
      expect(await sql(`SELECT value FROM "${schema}".loom_meta WHERE key = 'schema_version'`)).toEqual([
        { value: "6" },
      ]);
      expect(await writeRunSnapshot(reopened, "old")).toBe(12);
      // Pruning the run removes its snapshot with it: a new run under its id never meets it.
      await pruneRuns(reopened, { completedBefore: Date.now() + 60_000 });
      expect(await reopened.store.latestSnapshot?.("old")).toBeUndefined();
    } finally {
      await reopened.close();
    }
  });
});

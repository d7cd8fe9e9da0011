import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { isConcurrencyError, isJournalFormatError, type JournalFormatError } from "../../src/core/errors.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { isPostgresSchemaError, POSTGRES_SCHEMA_VERSION, postgresStore } from "../../src/postgres.ts";
import { decision, frameCompleted, frameStarted, runStarted } from "../events/entries.ts";
import { storeContract } from "../events/storeContract.ts";
import { dropSchema, freshSchema, PG_URL, SKIPPED, sql } from "./pg.ts";

// The one line `npm test` prints when there is no server: this file speaks for every postgres suite.
if (PG_URL === undefined) console.log(SKIPPED);

// Skipped without LOOM_PG_URL: there is no PostgreSQL server to hold the store to its contract.
describe.skipIf(PG_URL === undefined)("postgres", () => {
  const url = PG_URL as string;

  storeContract("postgres", async () => {
    const schema = freshSchema("contract");
    const store = postgresStore(url, { schema });
    await store.ready();
    return { store, cleanup: () => dropSchema(schema).then(() => {}) };
  });

  describe("postgresStore", () => {
    let schema: string;
    beforeEach(() => {
      schema = freshSchema("store");
    });
    afterEach(async () => {
      await dropSchema(schema);
    });

    it("creates its tables on open and records the schema version in loom_meta", async () => {
      await postgresStore(url, { schema }).close();
      const rows = await sql<{ value: string }>(`SELECT value FROM "${schema}".loom_meta WHERE key = 'schema_version'`);
      expect(rows).toEqual([{ value: String(POSTGRES_SCHEMA_VERSION) }]);
      const store = postgresStore(url, { schema }); // a second open finds them and changes nothing
      await store.ready();
      await store.close();
    });

    it("refuses a database whose Loom tables are newer than this Loom", async () => {
      await postgresStore(url, { schema }).close();
      await sql(`UPDATE "${schema}".loom_meta SET value = '99' WHERE key = 'schema_version'`);
      const store = postgresStore(url, { schema });
      const e = await store.ready().catch((x: unknown) => x);
      expect(isPostgresSchemaError(e)).toBe(true);
      expect(String(e)).toMatch(
        new RegExp(`schema version 99, newer than this Loom knows \\(${POSTGRES_SCHEMA_VERSION}\\); upgrade Loom`),
      );
      await expect(store.read("r")).rejects.toBe(e);
      await store.close();
    });

    it("refuses a schema name that is not a plain identifier, before any I/O", () => {
      expect(() => postgresStore(url, { schema: 'x"; DROP TABLE y; --' })).toThrow(/is not allowed/);
    });

    it("stores each entry's data as the exact text JSON.stringify wrote (loom_journal rebuilds it)", async () => {
      const store = postgresStore(url, { schema });
      const output = { z: 1, a: [true, null], s: "é\u2028🎉\u0000", d: new Date(0), n: 1e21 };
      await store.append("r", [frameStarted("f"), frameCompleted("f", output)], { expectedVersion: 0 });
      await store.close();
      const rows = await sql<{ data: string }>(
        `SELECT data FROM "${schema}".loom_journal WHERE run_id = 'r' AND seq = 2`,
      );
      expect(rows).toEqual([{ data: JSON.stringify({ frameId: "f", output }) }]);
      // The frame id is a column; the text column holds the output's JSON, as written.
      const [row] = await sql<{ frame: string; data: string; t: string }>(
        `SELECT frame, data, pg_typeof(data)::text AS t FROM "${schema}".loom_entries WHERE seq = 2`,
      );
      expect(row).toEqual({ frame: "f", data: JSON.stringify(output), t: "text" });
    });

    it("lets exactly one of many concurrent appends at one version win, on a new run and on a running one", async () => {
      const a = postgresStore(url, { schema });
      const b = postgresStore(url, { schema });
      for (const expectedVersion of [0, 1]) {
        const attempts = Array.from({ length: 16 }, (_, i) =>
          (i % 2 === 0 ? a : b).append("race", [expectedVersion === 0 ? runStarted() : decision(`d${i}`, i)], {
            expectedVersion,
          }),
        );
        const results = await Promise.allSettled(attempts);
        const won = results.filter((r) => r.status === "fulfilled");
        const lost = results.flatMap((r) => (r.status === "rejected" ? [r.reason] : []));
        expect(won.length).toBe(1);
        expect(lost.every(isConcurrencyError), String(lost.find((e) => !isConcurrencyError(e)))).toBe(true);
        expect(lost[0]).toMatchObject({ runId: "race", expected: expectedVersion, actual: expectedVersion + 1 });
      }
      expect((await a.read("race")).map((e) => e.seq)).toEqual([1, 2]);
      expect(await b.listRuns()).toEqual([{ runId: "race", version: 2, lastType: "decision.recorded", entries: 2 }]);
      await a.close();
      await b.close();
    });

    it("shares a caller's pool without ending it on close", async () => {
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      const store = postgresStore(pool, { schema });
      await store.append("r", [runStarted()], { expectedVersion: 0 });
      await store.close();
      expect((await pool.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
      await pool.end();
    });

    describe("a hand-damaged row is reported by readJournal with run, seq and field", () => {
      const damage = async (change: string): Promise<JournalFormatError> => {
        const store = postgresStore(url, { schema });
        await store.append(
          "r",
          [
            runStarted(),
            frameStarted("l#turn:0:tool:0"),
            frameCompleted("l#turn:0:tool:0", { n: 1 }),
            decision("d", 1),
          ],
          { expectedVersion: 0 },
        );
        await sql(change.replaceAll("$entries", `"${schema}".loom_entries`));
        try {
          await readJournal(createJournal({ store }), "r");
        } catch (e) {
          if (isJournalFormatError(e)) return e;
          throw e;
        } finally {
          await store.close();
        }
        throw new Error("expected a JournalFormatError");
      };

      it("truncated JSON", async () => {
        const e = await damage("UPDATE $entries SET data = left(data, length(data) - 4) WHERE seq = 3");
        expect(e).toMatchObject({ code: "journalFormat", runId: "r", seq: 3, field: "data" });
        expect(e.message).toMatch(/^run r seq 3 \(data\): the stored text is not JSON/);
      });

      it("a seq gap that no frames.archived marker explains", async () => {
        const e = await damage("DELETE FROM $entries WHERE seq = 2");
        expect(e).toMatchObject({ runId: "r", seq: 2, field: "seq" });
      });

      it("a future schema version", async () => {
        const e = await damage("UPDATE $entries SET v = 2 WHERE seq = 4");
        expect(e).toMatchObject({ runId: "r", seq: 4, field: "meta.v" });
      });
    });
  });

  describe("two stores on one database, as two machines would have", () => {
    const schema = freshSchema("shared");
    beforeAll(async () => {
      await postgresStore(url, { schema }).close();
    });
    afterAll(async () => {
      await dropSchema(schema);
    });

    it("each sees the other's appends, version and compaction", async () => {
      const a = postgresStore(url, { schema });
      const b = postgresStore(url, { schema });
      await a.append("r", [runStarted(), frameStarted("l#turn:0:tool:0"), frameCompleted("l#turn:0:tool:0", 1)], {
        expectedVersion: 0,
      });
      await expect(b.append("r", [decision("d", 1)], { expectedVersion: 0 })).rejects.toMatchObject({ actual: 3 });
      await b.compact("r", {
        removeSeqs: [2, 3],
        expectedVersion: 3,
        marker: {
          type: "frames.archived",
          data: {
            frameIds: ["l#turn:0:tool:0"],
            archiveRef: `sha256:${"a".repeat(64)}`,
            digests: { "l#turn:0:tool:0": { digest: "b".repeat(64), bytes: 1 } },
            seqs: [2, 3],
          },
        },
      });
      expect((await a.read("r")).map((e) => [e.seq, e.type])).toEqual([
        [1, "run.started"],
        [4, "frames.archived"],
      ]);
      await a.close();
      await b.close();
    });
  });
});

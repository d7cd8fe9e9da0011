import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { encodeEntries } from "../../src/events/rows.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { tablesIn } from "../../src/postgres/schema.ts";
import { appendEntries } from "../../src/postgres/store.ts";
import { databaseOf } from "../../src/postgres/submit.ts";
import { openPostgresJournal, postgresStore, startWorker, submitRun } from "../../src/postgres.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { frameCompleted, frameStarted, runStarted } from "../events/entries.ts";
import { countQueries, dropSchema, freshSchema, PG_URL, relaxes, sql, until } from "./pg.ts";

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("what an append and a run cost PostgreSQL", () => {
  const url = PG_URL as string;
  const schema = freshSchema("efficiency");
  beforeAll(async () => {
    const store = postgresStore(url, { schema });
    await store.ready();
    await store.close();
  });
  afterAll(async () => {
    await dropSchema(schema);
  });

  it('commits an append with durability "written" with synchronous_commit off, and a flushed one with it on', async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const t = tablesIn(schema);
    const add = (runId: string, version: number, written: boolean) => {
      const entries = version === 0 ? [runStarted()] : [frameStarted(`l#turn:${version}:model`, "model")];
      const { types, texts } = encodeEntries(runId, entries, version);
      return appendEntries(client as pg.PoolClient, t, runId, version, types, texts, undefined, undefined, undefined, {
        written,
      });
    };
    const setting = async () => (await client.query("SHOW synchronous_commit")).rows[0].synchronous_commit;
    try {
      // Inside a transaction of the test's own, the setting the append's commit will use can be read.
      await client.query("BEGIN");
      expect(await add("durability-1", 0, true)).toBe(true);
      expect(await setting()).toBe("off");
      await client.query("COMMIT");
      expect(await setting()).toBe("on"); // SET LOCAL: it ended with the transaction

      await client.query("BEGIN");
      expect(await add("durability-1", 1, false)).toBe(true);
      expect(await setting()).toBe("on");
      await client.query("COMMIT");
    } finally {
      await client.end();
    }
    const rows = await sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${schema}".loom_entries e JOIN "${schema}".loom_runs r ON r.run = e.run
        WHERE r.run_id = 'durability-1'`,
    );
    expect(rows[0]?.n).toBe(2);
  });

  it("sends one statement per append, relaxed or not, and the relaxed one leaves the connection as it was", async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const sent = countQueries(pool);
    const store = postgresStore(pool, { schema });
    try {
      await store.ready();
      sent.length = 0;
      await store.append("durability-2", [runStarted()], { expectedVersion: 0 });
      await store.append("durability-2", [frameStarted("l#turn:0:model", "model")], {
        expectedVersion: 1,
        durability: "written",
      });
      await store.append("durability-2", [frameCompleted("l#turn:0:model", { content: "hi", toolCalls: [] })], {
        expectedVersion: 2,
      });
      expect(sent.length).toBe(3);
      expect(sent.map(relaxes)).toEqual([false, true, false]);
      // One connection: the next statement after the relaxed commit runs with the server's setting.
      expect((await pool.query("SHOW synchronous_commit")).rows[0].synchronous_commit).toBe("on");
      expect((await store.read("durability-2")).map((e) => e.type)).toEqual([
        "run.started",
        "frame.started",
        "frame.completed",
      ]);
    } finally {
      await store.close();
      await pool.end();
    }
  });

  it("runs a five-turn run through startWorker in at most 3 round trips a turn, its model calls' starts relaxed", async () => {
    const turns = 5;
    const loop = agentLoop$({
      id: "five",
      maxIterations: turns + 1,
      model: scriptedModel(({ turn }) =>
        turn < turns
          ? { toolCalls: [{ id: `c${turn}`, name: "look", input: { turn } }] }
          : { content: "done", toolCalls: [] },
      ),
      tools: { look: { description: "looks", execute: (input) => ({ saw: input }) } },
    });
    const journal = openPostgresJournal(url, { schema, pool: { max: 4 } });
    const sent = countQueries(databaseOf(journal, "test").pool);
    try {
      await submitRun(journal, { runId: "five-1", loop, input: "go" });
      sent.length = 0;
      const worker = startWorker({ journal, loops: { five: loop }, pollMs: 20, onError: () => {} });
      // Polled on a connection of its own: the pool's statements are the worker's.
      const done = async () =>
        (await sql(`SELECT 1 FROM "${schema}".loom_runs WHERE run_id = 'five-1' AND last_type = 6`)).length === 1;
      await until("the run completes", done);
      await worker.stop();
      expect((await readJournal(journal, "five-1")).at(-1)?.type).toBe("run.completed");
      // The claim (which also reads the run), then two appends a turn, and two for the answer.
      const appends = sent.filter((text) => text.includes(`INSERT INTO "${schema}".loom_entries`));
      expect(appends.length).toBe(2 * turns + 2);
      // Every model call's frame.started commits without waiting for the flush (6 model calls);
      // the run's last append (its result, and the release) waits for it.
      expect(appends.filter(relaxes).length).toBe(turns + 1);
      expect(relaxes(appends.at(-1)!)).toBe(false);
      // What the idle worker sends after the run (claims that find nothing) is not the run's.
      const run = sent.slice(0, sent.lastIndexOf(appends.at(-1)!) + 1);
      expect(run.length).toBe(1 + 2 * turns + 2);
      expect(run.length / turns).toBeLessThanOrEqual(3);
    } finally {
      await journal.close();
    }
  });
});

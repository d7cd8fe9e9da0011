import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { NewEntry } from "../../src/events/types.ts";
import { tablesIn } from "../../src/postgres/schema.ts";
import { POSTGRES_SCHEMA_VERSION, postgresStore } from "../../src/postgres.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "./pg.ts";

const started: NewEntry = { type: "run.started", data: { loopId: "l", input: "go", tools: [] } };
const decision = (n: number): NewEntry => ({
  type: "decision.recorded",
  data: { decisionId: `d${n}`, source: "s", choice: n },
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("postgres appends announce themselves only to followers", () => {
  const url = PG_URL as string;
  let schema: string;
  let listener: pg.Client;
  const heard: string[] = [];
  /** What the appended channel carried so far (a round trip delivers every notification committed before it). */
  const announced = async () => {
    await listener.query("SELECT 1");
    return [...heard];
  };

  beforeEach(async () => {
    schema = freshSchema("announce");
    heard.length = 0;
    await postgresStore(url, { schema }).close(); // the tables
    listener = new pg.Client({ connectionString: url });
    await listener.connect();
    listener.on("notification", (n) => heard.push(n.payload ?? ""));
    await listener.query(`LISTEN ${tablesIn(schema).appended}`);
  });
  afterEach(async () => {
    await listener.end();
    await dropSchema(schema);
  });

  it("announces a run's first append, then only while a process watches the run", async () => {
    const writer = postgresStore(url, { schema });
    const follower = postgresStore(url, { schema });
    try {
      await writer.append("r", [started], { expectedVersion: 0 });
      await writer.append("r", [decision(1)], { expectedVersion: 1 });
      expect(await announced()).toEqual(["r"]); // the first append only: nobody follows "r"
      let woken = 0;
      const stop = follower.watch!("r", () => woken++);
      for (let t = 0; woken === 0 && t < 500; t++) await sleep(10); // registered, then told once
      expect(woken).toBe(1);
      const [row] = await sql<{ ahead: number }>(
        `SELECT extract(epoch FROM watched_until - now())::float8 AS ahead FROM "${schema}".loom_runs WHERE run_id = 'r'`,
      );
      expect(row?.ahead).toBeGreaterThan(50); // a minute ahead, renewed while watched
      await writer.append("r", [decision(2)], { expectedVersion: 2 });
      for (let t = 0; woken === 1 && t < 500; t++) await sleep(10);
      expect(woken).toBe(2);
      expect(await announced()).toEqual(["r", "r"]);
      stop();
    } finally {
      await writer.close();
      await follower.close();
    }
  });

  it("loses no append to a follower that starts while the run is being written", async () => {
    const writer = postgresStore(url, { schema });
    const follower = postgresStore(url, { schema });
    const last = 120;
    try {
      await writer.append("busy", [started], { expectedVersion: 0 });
      let seen = 0;
      let reading = Promise.resolve();
      const catchUp = () => {
        reading = reading.then(async () => {
          const entries = await follower.read("busy", { from: seen + 1 });
          seen = entries.at(-1)?.seq ?? seen;
        });
      };
      const writing = (async () => {
        for (let v = 1; v < last; v++) await writer.append("busy", [decision(v)], { expectedVersion: v });
      })();
      await sleep(30); // mid-run
      const stop = follower.watch!("busy", catchUp);
      await writing;
      // No polling: only announcements (and the registration's own wake-up) make it read.
      for (let t = 0; seen < last && t < 300; t++) await sleep(10);
      await reading;
      expect(seen).toBe(last);
      stop();
    } finally {
      await writer.close();
      await follower.close();
    }
  });

  it("migrates a version 2 database to the current version in place (one column each), and follows its runs", async () => {
    const store = postgresStore(url, { schema });
    await store.append("old", [started, decision(1)], { expectedVersion: 0 });
    await store.close();
    // Version 2's tables: version 4's without the columns 3 and 4 added.
    await sql(`ALTER TABLE "${schema}".loom_runs DROP COLUMN watched_until`);
    await sql(`ALTER TABLE "${schema}".loom_leases DROP COLUMN woken`);
    await sql(`UPDATE "${schema}".loom_meta SET value = '2' WHERE key = 'schema_version'`);
    const reopened = postgresStore(url, { schema });
    try {
      await reopened.ready();
      expect(await sql(`SELECT value FROM "${schema}".loom_meta WHERE key = 'schema_version'`)).toEqual([
        { value: String(POSTGRES_SCHEMA_VERSION) },
      ]);
      expect(POSTGRES_SCHEMA_VERSION).toBe(6);
      expect((await reopened.read("old")).map((e) => e.type)).toEqual(["run.started", "decision.recorded"]);
      let woken = 0;
      const stop = reopened.watch!("old", () => woken++);
      for (let t = 0; woken === 0 && t < 500; t++) await sleep(10);
      await reopened.append("old", [decision(2)], { expectedVersion: 2 });
      for (let t = 0; woken < 2 && t < 500; t++) await sleep(10);
      expect(woken).toBe(2);
      expect(await announced()).toEqual(["old", "old"]); // its first append, then the followed one
      stop();
    } finally {
      await reopened.close();
    }
  });
});

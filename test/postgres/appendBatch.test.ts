import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isConcurrencyError, isOwnershipLostError, isRunCancelledError } from "../../src/core/errors.ts";
import type { AppendOptions } from "../../src/events/store.ts";
import type { NewEntry } from "../../src/events/types.ts";
import { tablesIn } from "../../src/postgres/schema.ts";
import { appendFinishing, type PostgresEventStore, postgresStore } from "../../src/postgres/store.ts";
import { frameCompleted, frameStarted, runCompleted, runStarted } from "../events/entries.ts";
import { countQueries, dropSchema, freshSchema, PG_URL, relaxes, sql, until } from "./pg.ts";

const isBatch = (text: string) => text.includes("FROM input i LEFT JOIN fence f");
const isSingle = (text: string) => text.includes("loom_entries") && text.includes("INSERT") && !isBatch(text);
const model = (i: number) => frameStarted(`l#turn:${i}:model`, "model");

/** What an append settled as: "ok", or the error's class name. */
const outcome = (p: Promise<unknown>) =>
  p.then(
    () => "ok",
    (e: unknown) =>
      isConcurrencyError(e)
        ? "ConcurrencyError"
        : isOwnershipLostError(e)
          ? "OwnershipLostError"
          : isRunCancelledError(e)
            ? "RunCancelledError"
            : String(e),
  );

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("appends of many runs in one statement (appendBatch.ts)", () => {
  const url = PG_URL as string;
  const schema = freshSchema("batch");
  let pool: pg.Pool;
  let sent: string[];
  let store: PostgresEventStore;
  const types = async (runId: string) => (await store.read(runId)).map((e) => e.type);

  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: url, max: 4 });
    sent = countQueries(pool);
    store = postgresStore(pool, { schema });
    await store.ready();
  });
  afterAll(async () => {
    await store.close();
    await pool.end();
    await dropSchema(schema);
  });

  /** Runs that exist (their `run.started`, each its own statement: a first append goes out alone). */
  const started = async (...runIds: string[]) => {
    for (const runId of runIds) await store.append(runId, [runStarted()], { expectedVersion: 0 });
    sent.length = 0;
  };

  it("writes the appends of many runs asked for at once in one statement, each run at its own version", async () => {
    const runs = Array.from({ length: 30 }, (_, i) => `many-${String(i).padStart(2, "0")}`);
    await started(...runs);
    await store.append("many-00", [model(0)], { expectedVersion: 1 }); // one run ahead of the others
    sent.length = 0;
    const results = await Promise.all(
      runs.map((runId, i) =>
        store.append(runId, i === 0 ? [frameCompleted("l#turn:0:model", { content: "x" })] : [model(0), model(1)], {
          expectedVersion: i === 0 ? 2 : 1,
        }),
      ),
    );
    expect(results.map((r) => r.version)).toEqual(runs.map(() => 3));
    expect(sent.filter(isBatch).length).toBe(1);
    expect(sent.filter(isSingle).length).toBe(0);
    expect(await types("many-00")).toEqual(["run.started", "frame.started", "frame.completed"]);
    expect(await types("many-17")).toEqual(["run.started", "frame.started", "frame.started"]);
    const rows = await sql<{ version: number; entries: number }>(
      `SELECT version, entries FROM "${schema}".loom_runs WHERE run_id LIKE 'many-%'`,
    );
    expect(rows.every((r) => r.version === 3 && r.entries === 3)).toBe(true);
  });

  it("refuses within a batch only the runs whose version moved, whose lease moved on or that were cancelled", async () => {
    await started("ok", "stale", "lost", "cancelled", "cancelling");
    await store.append("stale", [model(0)], { expectedVersion: 1 }); // another append moved it first
    const lease = async (runId: string) => (await store.acquire(runId, { owner: "w", leaseMs: 60_000 })).token;
    const okToken = await lease("ok");
    const lostLease = await store.acquire("lost", { owner: "w", leaseMs: 60_000 });
    await store.release(lostLease);
    await lease("lost"); // the token moved on: the first one is stale
    const cancelledToken = await lease("cancelled");
    const cancellingToken = await lease("cancelling");
    await store.requestCancel("cancelled", "stop");
    await store.requestCancel("cancelling", "stop");
    sent.length = 0;
    const ask = (runId: string, entries: NewEntry[], options: AppendOptions) =>
      outcome(store.append(runId, entries, options));
    const results = await Promise.all([
      ask("ok", [model(0)], { expectedVersion: 1, fence: okToken }),
      ask("stale", [model(1)], { expectedVersion: 1 }),
      ask("lost", [model(0)], { expectedVersion: 1, fence: lostLease.token }),
      ask("cancelled", [model(0)], { expectedVersion: 1, fence: cancelledToken }),
      ask("cancelling", [{ type: "run.cancelled", data: { reason: "stop" } }], {
        expectedVersion: 1,
        fence: cancellingToken,
      }),
    ]);
    expect(results).toEqual(["ok", "ConcurrencyError", "OwnershipLostError", "RunCancelledError", "ok"]);
    expect(sent.filter(isBatch).length).toBe(1);
    expect(await types("ok")).toEqual(["run.started", "frame.started"]);
    expect(await types("stale")).toEqual(["run.started", "frame.started"]);
    for (const runId of ["lost", "cancelled"]) expect(await types(runId)).toEqual(["run.started"]);
    expect(await types("cancelling")).toEqual(["run.started", "run.cancelled"]);
  });

  it("takes each finishing run off the queue and releases it, and hands a woken run's row back due", async () => {
    await started("fin-a", "fin-b", "fin-c");
    const tokens = new Map<string, number>();
    for (const runId of ["fin-a", "fin-b", "fin-c"]) {
      tokens.set(runId, (await store.acquire(runId, { owner: "w", leaseMs: 60_000 })).token);
      await sql(
        `INSERT INTO "${schema}".loom_leases (run_id, loop_id, owner, expires_at, woken)
         VALUES ($1, 'demo', 'w', now() + interval '1 minute', $2)`,
        [runId, runId === "fin-b"],
      );
    }
    sent.length = 0;
    const finish = (runId: string) =>
      store[appendFinishing](runId, [runCompleted()], { expectedVersion: 1, fence: tokens.get(runId)! }, "w");
    // fin-c is finished by another queue owner's name: its row is not this worker's to take off.
    const c = store[appendFinishing](
      "fin-c",
      [runCompleted()],
      { expectedVersion: 1, fence: tokens.get("fin-c")! },
      "x",
    );
    await Promise.all([finish("fin-a"), finish("fin-b"), c]);
    expect(sent.filter(isBatch).length).toBe(1);
    const queue = await sql<{ run_id: string; owner: string | null; due: boolean }>(
      `SELECT run_id, owner, expires_at <= now() AS due FROM "${schema}".loom_leases WHERE run_id LIKE 'fin-%' ORDER BY run_id`,
    );
    expect(queue).toEqual([
      { run_id: "fin-b", owner: null, due: true },
      { run_id: "fin-c", owner: "w", due: false },
    ]);
    const owners = await sql<{ run_id: string; owner: string | null }>(
      `SELECT run_id, owner FROM "${schema}".loom_owners WHERE run_id LIKE 'fin-%' ORDER BY run_id`,
    );
    expect(owners.map((o) => o.owner)).toEqual([null, null, null]); // the ownership is released with the append
  });

  it("announces a followed run's append, and no other run's in the same batch", async () => {
    await started("told", "quiet-1", "quiet-2");
    await sql(`UPDATE "${schema}".loom_runs SET watched_until = now() + interval '1 minute' WHERE run_id = 'told'`);
    const listener = new pg.Client({ connectionString: url });
    await listener.connect();
    const heard: string[] = [];
    listener.on("notification", (n) => heard.push(n.payload ?? ""));
    await listener.query(`LISTEN "${tablesIn(schema).appended}"`);
    try {
      sent.length = 0;
      await Promise.all(
        ["told", "quiet-1", "quiet-2"].map((runId) => store.append(runId, [model(0)], { expectedVersion: 1 })),
      );
      expect(sent.filter(isBatch).length).toBe(1);
      await until("the announcement", () => heard.length > 0);
      await store.append("quiet-1", [model(1)], { expectedVersion: 2 }); // a later statement: its NOTIFY would come after
      expect(heard).toEqual(["told"]);
    } finally {
      await listener.end();
    }
  });

  it("sends a batch the server refuses as a whole again run by run, so only the run at fault fails", async () => {
    await started("fine-1", "broken", "fine-2");
    // An entry already at the seq the next append of "broken" writes: the batch's insert violates the key.
    await sql(
      `INSERT INTO "${schema}".loom_entries (at, run, seq, type, v, data)
       SELECT 0, run, 2, type, v, data FROM "${schema}".loom_entries
        WHERE run = (SELECT run FROM "${schema}".loom_runs WHERE run_id = 'broken') AND seq = 1`,
    );
    sent.length = 0;
    const results = await Promise.all(
      ["fine-1", "broken", "fine-2"].map((runId) => outcome(store.append(runId, [model(0)], { expectedVersion: 1 }))),
    );
    expect(results).toEqual(["ok", "ConcurrencyError", "ok"]);
    expect(sent.filter(isBatch).length).toBe(1);
    expect(sent.filter(isSingle).length).toBe(3);
    expect(await types("fine-1")).toEqual(["run.started", "frame.started"]);
  });

  it("batches appends that need only be written apart from durable ones, and commits only those relaxed", async () => {
    await started("w-1", "w-2", "d-1", "d-2");
    await Promise.all([
      store.append("w-1", [model(0)], { expectedVersion: 1, durability: "written" }),
      store.append("d-1", [model(0)], { expectedVersion: 1 }),
      store.append("w-2", [model(0)], { expectedVersion: 1, durability: "written" }),
      store.append("d-2", [model(0)], { expectedVersion: 1 }),
    ]);
    const batches = sent.filter(isBatch);
    expect(batches.length).toBe(2);
    expect(batches.map(relaxes).sort()).toEqual([false, true]);
    for (const runId of ["w-1", "w-2", "d-1", "d-2"])
      expect(await types(runId)).toEqual(["run.started", "frame.started"]);
  });

  it("sends an append alone when nothing else is asked for at the same time", async () => {
    await started("alone");
    await store.append("alone", [model(0)], { expectedVersion: 1 });
    expect(sent.filter(isBatch).length).toBe(0);
    expect(sent.filter(isSingle).length).toBe(1);
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isConcurrencyError } from "../../src/core/errors.ts";
import { type OpenJournal, readJournal } from "../../src/events/journal.ts";
import type { NewEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { leases } from "../../src/postgres/leases.ts";
import { claimOwnRead, pickedUpJournal } from "../../src/postgres/pickup.ts";
import { ownStore } from "../../src/postgres/store.ts";
import { databaseOf } from "../../src/postgres/submit.ts";
import { openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "./pg.ts";

const loop = agentLoop$({
  id: "p",
  model: scriptedModel(({ turn }) =>
    turn === 0 ? { toolCalls: [{ id: "c", name: "work", input: {} }] } : { content: "ok", toolCalls: [] },
  ),
  tools: { work: { description: "works", execute: () => ({ done: true }) } },
});

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("a worker's pickup: claim, ownership and read in one statement", () => {
  const schema = freshSchema("pickup");
  let journal: OpenJournal;
  const owners = async (runId: string) =>
    (
      await sql<{ token: number; owner: string | null }>(
        `SELECT token, owner FROM "${schema}".loom_owners WHERE run_id = $1`,
        [runId],
      )
    )[0];
  const queued = async (runId: string) =>
    (await sql(`SELECT 1 FROM "${schema}".loom_leases WHERE run_id = $1`, [runId])).length === 1;

  beforeAll(() => {
    journal = openPostgresJournal(PG_URL as string, { schema });
  });
  afterAll(async () => {
    await journal.close();
    await dropSchema(schema);
  });

  it("claims a free run with its ownership and its journal; leaves a run another process owns to acquire", async () => {
    const db = databaseOf(journal, "test");
    await submitRun(journal, { runId: "free", loop, input: "a" });
    await submitRun(journal, { runId: "held", loop, input: "b" });
    const other = await journal.store.acquire("held", { owner: "someone else", leaseMs: 60_000 });
    const { claims: picked } = await claimOwnRead(db, "w1", ["p"], 30_000, 5);
    expect(picked.map((p) => p.runId).sort()).toEqual(["free", "held"]);
    const free = picked.find((p) => p.runId === "free")!;
    expect(free.owned?.entries).toEqual(await readJournal(journal, "free"));
    expect(free.owned?.lease).toMatchObject({ runId: "free", owner: "w1", token: 1 });
    expect(await owners("free")).toEqual({ token: 1, owner: "w1" });
    // The held run is claimed (its queue row) but its ownership stays with its holder.
    expect(picked.find((p) => p.runId === "held")?.owned).toBeUndefined();
    expect(await owners("held")).toEqual({ token: other.token, owner: "someone else" });
    await journal.store.release(other);
    expect(await claimOwnRead(db, "w2", ["p"], 30_000, 5)).toEqual({ claims: [], dropped: 0 }); // both are w1's now
    await sql(`DELETE FROM "${schema}".loom_leases`);
  });

  it("takes runs that need no worker off the head of the queue instead of claiming them", async () => {
    const db = databaseOf(journal, "test");
    // Two runs already completed (a worker killed between its last append and its release would
    // leave such rows) and one with no journal at all, queued first; then a live run behind them.
    for (const runId of ["done-1", "done-2"]) {
      await loop.run({ runId, journal, input: "x" });
      await submitRun(journal, { runId, loop });
    }
    await sql(
      `INSERT INTO "${schema}".loom_leases (run_id, loop_id, expires_at) VALUES ('gone', 'p', now() - interval '1 hour')`,
    );
    await sql(`UPDATE "${schema}".loom_leases SET expires_at = now() - interval '1 minute' WHERE run_id LIKE 'done-%'`);
    await submitRun(journal, { runId: "live", loop, input: "y" });
    const first = await claimOwnRead(db, "w1", ["p"], 30_000, 2);
    expect(first).toEqual({ claims: [], dropped: 2 }); // the head: "gone", then one of the completed runs
    const second = await claimOwnRead(db, "w1", ["p"], 30_000, 2);
    expect(second.dropped).toBe(1);
    expect(second.claims.map((c) => c.runId)).toEqual(["live"]);
    expect(await sql(`SELECT run_id FROM "${schema}".loom_leases ORDER BY run_id`)).toEqual([{ run_id: "live" }]);
    // Through the plain claim (a wrapped store's worker) the same.
    await sql(`DELETE FROM "${schema}".loom_leases`);
    await submitRun(journal, { runId: "done-1", loop });
    await submitRun(journal, { runId: "live-2", loop, input: "z" });
    await sql(`UPDATE "${schema}".loom_leases SET expires_at = now() - interval '1 minute' WHERE run_id = 'done-1'`);
    const plain = await leases(db).claim("w1", ["p"], 30_000, 1);
    expect(plain).toEqual({ claims: [], dropped: 1 });
    expect((await leases(db).claim("w1", ["p"], 30_000, 1)).claims.map((c) => c.runId)).toEqual(["live-2"]);
    await sql(`DELETE FROM "${schema}".loom_leases`);
  });

  it("takes the run off the queue and releases it in its last append, and only if that append is written", async () => {
    const db = databaseOf(journal, "test");
    await submitRun(journal, { runId: "last", loop, input: "c" });
    const [claim] = (await claimOwnRead(db, "w1", ["p"], 30_000, 1)).claims;
    const { lease, entries } = claim!.owned!;
    const picked = pickedUpJournal(journal, ownStore(journal.store)!, "last", entries, "w1");
    expect(await picked.journal.store.read("last")).toBe(entries); // the claim's read, not a second one
    const completed: NewEntry = { type: "run.completed", data: { output: { content: "done", iterations: 0 } } };
    // At a stale version: refused, and the queue row and the ownership stay.
    const stale = await picked.journal.store
      .append("last", [completed], { expectedVersion: 5, fence: lease.token })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isConcurrencyError(stale)).toBe(true);
    expect(picked.finished()).toBe(false);
    expect([await queued("last"), await owners("last")]).toEqual([true, { token: 1, owner: "w1" }]);
    // At the run's version: written, off the queue, released, in that one statement.
    await picked.journal.store.append("last", [completed], { expectedVersion: 1, fence: lease.token });
    expect(picked.finished()).toBe(true);
    expect([await queued("last"), await owners("last")]).toEqual([false, { token: 1, owner: null }]);
    expect((await readJournal(journal, "last")).map((e) => e.type)).toEqual(["run.started", "run.completed"]);
  });

  it("runs a submitted run through a worker and leaves nothing queued or owned", async () => {
    for (let i = 0; i < 6; i++) await submitRun(journal, { runId: `w-${i}`, loop, input: `${i}` });
    const worker = startWorker({ journal, loops: { p: loop }, concurrency: 3, pollMs: 20, onError: () => {} });
    const done = async () =>
      (await sql(`SELECT 1 FROM "${schema}".loom_runs WHERE run_id LIKE 'w-%' AND last_type = 6`)).length === 6;
    for (let t = 0; !(await done()); t++) {
      if (t > 500) throw new Error("timed out waiting for 6 runs to complete");
      await new Promise((r) => setTimeout(r, 20));
    }
    await worker.stop();
    expect(await sql(`SELECT run_id FROM "${schema}".loom_leases WHERE run_id LIKE 'w-%'`)).toEqual([]);
    expect(
      await sql(`SELECT run_id FROM "${schema}".loom_owners WHERE run_id LIKE 'w-%' AND owner IS NOT NULL`),
    ).toEqual([]);
    const out = await loop.run({ runId: "w-3", journal });
    expect(out.content).toBe("ok");
  });
});

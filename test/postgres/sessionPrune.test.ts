import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { OpenJournal } from "../../src/events/journal.ts";
import { sessionHistory } from "../../src/index.ts";
import { pruneRuns } from "../../src/journal.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { runCompleted, runStarted } from "../events/entries.ts";
import { sessionLoop } from "../fixtures/sessionLoop.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "./pg.ts";

const DAY = 86_400_000;

/**
 * A session's message names the history of the message before it instead of copying it, so
 * `pruneRuns` keeps a message while a later message of its session is kept: a kept run never
 * loses its history. A session all of whose messages are old and finished goes whole.
 */
describe.skipIf(PG_URL === undefined)("pruneRuns on PostgreSQL, beside sessions", () => {
  const url = PG_URL as string;
  let schema: string;
  let journal: OpenJournal;
  const send = (sessionId: string, message: string, budget?: { modelCalls: number }) =>
    sessionLoop()
      .send({ sessionId, journal, message, ...(budget ? { budget } : {}) })
      .catch((e: unknown) => e);
  const runIds = async () => (await journal.store.listRuns()).map((r) => r.runId).sort();

  beforeEach(async () => {
    schema = freshSchema("sessionprune");
    journal = openPostgresJournal(url, { schema });
  });
  afterEach(async () => {
    await journal.close();
    await dropSchema(schema);
  });

  it("keeps a message while a later one of its session is kept, and prunes a session that ended long ago whole", async () => {
    for (const m of ["tides", "moons", "orbits"]) await send("chat", m);
    await send("chat", "comets", { modelCalls: 1 }); // stopped by its budget: kept, it can be resumed
    for (const m of ["tides", "moons"]) await send("gone", m);
    for (const m of ["tides", "moons"]) await send("recent", m);
    // A run whose id only looks like a message of a session, with no later message: it goes as any run does.
    await journal.store.append("order/7", [runStarted("l"), runCompleted()], { expectedVersion: 0 });
    const old = (await runIds()).filter((id) => id !== "recent/1");
    await sql(`UPDATE "${schema}".loom_runs SET updated_at = updated_at - $2::bigint WHERE run_id = ANY($1)`, [
      old,
      10 * DAY,
    ]);
    const completedBefore = Date.now() - 7 * DAY;
    expect((await pruneRuns(journal, { completedBefore, dryRun: true })).runs).toBe(3);
    expect((await pruneRuns(journal, { completedBefore, batchSize: 1 })).runs).toBe(3);
    expect(await runIds()).toEqual(["chat/0", "chat/1", "chat/2", "chat/3", "recent/0", "recent/1"]);

    // Another process reads the kept sessions whole and resumes the stopped message on its history.
    const other = openPostgresJournal(url, { schema });
    try {
      expect((await sessionHistory(other, "recent")).filter((m) => m.role === "user")).toHaveLength(2);
      const out = await sessionLoop().run({ runId: "chat/3", journal: other, budget: { modelCalls: 10 } });
      expect(out.content).toBe('#4 comets: {"note":"notes on comets"}');
      expect((await sessionHistory(other, "chat")).filter((m) => m.role === "user")).toHaveLength(4);
    } finally {
      await other.close();
    }
  });
});

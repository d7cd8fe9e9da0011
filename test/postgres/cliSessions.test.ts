import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, openSqliteJournal } from "../../src/index.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { loom, tempDir } from "../cli/support.ts";
import { sessionLoop } from "../fixtures/sessionLoop.ts";
import { dropSchema, freshSchema, PG_URL } from "./pg.ts";

/** The same session recorded in a SQLite file and in a PostgreSQL schema: two messages answered. */
async function record(journal: OpenJournal): Promise<void> {
  const loop = sessionLoop();
  await loop.send({ sessionId: "chat-1", journal, message: "tides" });
  await loop.send({ sessionId: "chat-1", journal, message: "moons" });
}

/** What may differ between two recordings: where the journal is, and the clock. */
const normalized = (text: string) => text.replace(/\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z?/g, "<time>");

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("sessions in the loom command on PostgreSQL", () => {
  const dir = tempDir("loom-cli-pg-sessions-");
  const schema = freshSchema("clisessions");
  const db = join(dir, "loom.db");
  const onPg = ["--pg", PG_URL ?? "postgres://skipped/", "--pg-schema", schema];
  const onSqlite = ["--db", db];

  beforeAll(async () => {
    const sqlite = openSqliteJournal(db);
    const pg = openPostgresJournal(PG_URL ?? "", { schema });
    try {
      await record(sqlite);
      await record(pg);
    } finally {
      await sqlite.close();
      await pg.close();
    }
  });
  afterAll(() => dropSchema(schema));

  it("loom show <sessionId> and loom runs --session/--sessions say the same of either journal", async () => {
    for (const args of [
      ["show", "chat-1"],
      ["runs", "--session", "chat-1"],
      ["runs", "--sessions"],
      ["show", "chat-1", "--json"],
    ]) {
      const fromPg = await loom(dir, [...args, ...onPg]);
      const fromSqlite = await loom(dir, [...args, ...onSqlite]);
      expect(fromPg.code, fromPg.stderr).toBe(0);
      expect(normalized(fromPg.stdout)).toBe(normalized(fromSqlite.stdout));
    }
    const shown = await loom(dir, ["show", "chat-1", ...onPg]);
    expect(shown.stdout).toMatch(/^message 1 {2}chat-1\/1 {2}completed, 2 model calls$/m);
  });
});

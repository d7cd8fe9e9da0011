import { afterAll, describe, expect, it } from "vitest";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { TYPE_CODES } from "../../src/events/sqlite/sqliteRows.ts";
import type { Model } from "../../src/models/types.ts";
import { postgresStore } from "../../src/postgres.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "./pg.ts";

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("postgres: failed attempts", () => {
  const schema = freshSchema("retry");
  afterAll(() => dropSchema(schema));

  it("journals attempt.failed in its own type code and reads it back, so a resume on another connection sees it", async () => {
    let calls = 0;
    const model: Model = {
      generate: async () => {
        calls++;
        if (calls === 1) throw Object.assign(new Error("unavailable"), { status: 503 });
        return { content: "ok", toolCalls: [] };
      },
    };
    const store = postgresStore(PG_URL as string, { schema });
    const journal = createJournal({ store });
    const loop = agentLoop$({ id: "m", model, retry: { model: { initialDelayMs: 5 } } });
    expect((await loop.run({ runId: "r", journal, input: "hi" })).content).toBe("ok");
    await journal.close();
    const reopened = createJournal({ store: postgresStore(PG_URL as string, { schema }) });
    const failed = (await readJournal(reopened, "r")).filter((e) => e.type === "attempt.failed");
    expect(failed.map((e) => e.data)).toEqual([
      {
        frameId: "m#turn:0:model",
        attempt: 1,
        error: { name: "Error", message: "unavailable", status: 503, retryable: true },
        retryAt: expect.any(Number),
      },
    ]);
    const rows = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".loom_entries WHERE type = $1`, [
      TYPE_CODES["attempt.failed"],
    ]);
    expect(rows[0]?.n).toBe(1);
    await reopened.close();
  });
});

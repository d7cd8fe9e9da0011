import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentLoop$, readJournal, scriptedModel } from "../../src/index.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { loom, tempDir } from "../cli/support.ts";
import { jsonJournal } from "../support/loop.ts";
import { dropSchema, freshSchema, PG_URL } from "./pg.ts";

/**
 * A stalled run (its process died mid-tool, nobody holds it) on PostgreSQL: `loom show` and
 * `loom runs` say that a worker takes it over once its lease runs out, besides `loop.run(…)`; on
 * SQLite, where no worker does, only `loop.run(…)`.
 */

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("what loom advises for a stalled run on PostgreSQL", () => {
  const dir = tempDir("loom-pg-stalled-");
  const schema = freshSchema("stalled");
  const url = PG_URL ?? "postgres://skipped/";
  const onPg = ["--pg", url, "--pg-schema", schema];

  beforeAll(async () => {
    // The entries a process killed while the tool ran leaves: up to the tool's start.
    const loop = agentLoop$({
      id: "charger",
      model: scriptedModel([
        { content: "charging", toolCalls: [{ id: "c", name: "charge", input: {} }] },
        { content: "charged", toolCalls: [] },
      ]),
      tools: { charge: { description: "charges", execute: () => "ok" } },
    });
    const memory = jsonJournal();
    await loop.run({ runId: "pay-1", journal: memory, input: "charge" });
    const entries = await readJournal(memory, "pay-1");
    const cut = entries.findIndex((e) => e.type === "frame.started" && e.data.frameId === "charger#turn:0:tool:0");
    const pg = openPostgresJournal(url, { schema });
    try {
      await pg.store.append(
        "pay-1",
        entries.slice(0, cut + 1).map(({ type, data }) => ({ type, data }) as never),
        { expectedVersion: 0 },
      );
    } finally {
      await pg.close();
    }
  });
  afterAll(() => dropSchema(schema));

  it("says a worker takes it over once its lease runs out, and how to resume it from a program", async () => {
    const advice =
      'loop.run({ runId: "pay-1", journal }); a worker takes it over by itself once its lease runs out, if it was submitted to workers (submitRun)';
    const show = await loom(dir, ["show", "pay-1", ...onPg]);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain(`status  stalled — resume with ${advice}, `);
    const runs = await loom(dir, ["runs", ...onPg]);
    expect(runs.stdout).toContain(`resume with ${advice}`);
  });
});

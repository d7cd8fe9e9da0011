import pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createJournal, type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { NewEntry } from "../../src/events/types.ts";
import { isPruneNotSupportedError, pruneRuns } from "../../src/journal.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { loom } from "../cli/support.ts";
import { decision, frameCompleted, frameStarted, runCompleted, runStarted } from "../events/entries.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "./pg.ts";

const DAY = 86_400_000;
const bytes = (s: string) => new TextEncoder().encode(s);
const envelope = (ref: string) => ({ ref, digest: ref.slice(7), bytes: 10 });

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("pruneRuns on PostgreSQL", () => {
  const url = PG_URL as string;
  let schema: string;
  let journal: OpenJournal;
  let refs: { own: string; shared: string; fresh: string; archived: string };

  /** A run of one tool turn whose output is `output`, ending with `end` (or still running). */
  const run = async (runId: string, output: unknown, end?: NewEntry) => {
    const f = "l#turn:0:tool:0";
    const entries = [runStarted("l"), frameStarted(f), frameCompleted(f, output), ...(end ? [end] : [])];
    await journal.store.append(runId, entries, { expectedVersion: 0 });
  };
  const age = (runIds: string[], days: number) =>
    sql(`UPDATE "${schema}".loom_runs SET updated_at = updated_at - $2::bigint WHERE run_id = ANY($1)`, [
      runIds,
      days * DAY,
    ]);
  const blobsLeft = async () =>
    (await sql<{ d: string }>(`SELECT encode(digest, 'hex') AS d FROM "${schema}".loom_blobs ORDER BY 1`)).map(
      (r) => `sha256:${r.d}`,
    );

  beforeEach(async () => {
    schema = freshSchema("prune");
    journal = openPostgresJournal(url, { schema });
    const put = async (s: string) => (await journal.blobs!.put(bytes(s))).ref;
    refs = {
      own: await put("only the old run names me"),
      shared: await put("two runs name me"),
      fresh: await put("put after the cutoff"),
      archived: await put("named by an archived frame"),
    };
    await run("old-done", [envelope(refs.own), envelope(refs.shared), envelope(refs.fresh)], runCompleted());
    await run("old-failed", { n: 1 }, { type: "run.failed", data: { error: { name: "Error", message: "x" } } });
    await run("old-interrupted", { n: 2 }, { type: "run.interrupted", data: { reason: "model-error", detail: null } });
    await run("old-archived", envelope(refs.archived), runCompleted());
    await journal.archive!.put("old-archived", [
      { frameId: "l#turn:0:tool:0", output: envelope(refs.archived) },
    ] as never);
    await run("new-done", { n: 3 }, runCompleted());
    await run("live", envelope(refs.shared));
    await age(["old-done", "old-failed", "old-interrupted", "old-archived", "live"], 10);
    // Every blob was put long ago but `fresh`, put again a moment ago (a live run about to name it).
    await sql(`UPDATE "${schema}".loom_blobs SET put_at = put_at - $1::bigint`, [10 * DAY]);
    await journal.blobs!.put(bytes("put after the cutoff"));
  });
  afterEach(async () => {
    await journal.close();
    await dropSchema(schema);
  });

  it("removes finished runs, their archives and the blobs no other run names; keeps the rest", async () => {
    const completedBefore = Date.now() - 7 * DAY;
    const dry = await pruneRuns(journal, { completedBefore, dryRun: true });
    expect(dry).toEqual({ runs: 3, entries: 12, archives: 1, blobs: 2 });
    expect((await journal.store.listRuns()).length).toBe(6); // a dry run removes nothing

    const done = await pruneRuns(journal, { completedBefore, batchSize: 2 });
    expect(done).toEqual(dry);
    expect((await journal.store.listRuns()).map((r) => r.runId)).toEqual(["live", "new-done", "old-interrupted"]);
    expect(await readJournal(journal, "old-done")).toEqual([]);
    expect(await blobsLeft()).toEqual([refs.shared, refs.fresh].sort()); // `own` and `archived` went
    expect(await sql(`SELECT ref FROM "${schema}".loom_archive`)).toEqual([]);
    // The live run goes on, its shared blob readable.
    await journal.store.append("live", [decision("d", 1)], { expectedVersion: 3 });
    expect(new TextDecoder().decode(await journal.blobs!.get(refs.shared as never))).toBe("two runs name me");
    expect(await pruneRuns(journal, { completedBefore })).toEqual({ runs: 0, entries: 0, archives: 0, blobs: 0 });
  });

  it("removes a cancelled run too: it has ended for good (a resume of it is refused with RunCancelledError)", async () => {
    await run("old-cancelled", { n: 4 }, { type: "run.cancelled", data: { reason: "operator stop" } });
    await age(["old-cancelled"], 10);
    const done = await pruneRuns(journal, { completedBefore: Date.now() - 7 * DAY });
    expect(done.runs).toBe(4);
    const left = (await journal.store.listRuns()).map((r) => r.runId);
    expect(left).not.toContain("old-cancelled");
    expect(left).toContain("old-interrupted");
  });

  it("skips a finished run some transaction holds, instead of waiting for it", async () => {
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${schema}".loom_runs WHERE run_id = 'old-done' FOR UPDATE`);
      const done = await pruneRuns(journal.store, { completedBefore: Date.now() - 7 * DAY });
      expect(done.runs).toBe(2);
      await holder.query("COMMIT");
    } finally {
      await holder.end();
    }
    expect((await journal.store.listRuns()).map((r) => r.runId)).toContain("old-done");
  });

  it("loom prune --pg: a dry run, then the prune, as counts", async () => {
    const argv = ["prune", "--pg", url, "--schema", schema, "--completed-before", "7d", "--json"];
    const dry = await loom(process.cwd(), [...argv, "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ runs: 3, blobs: 2, archives: 1, dryRun: true });
    const text = await loom(process.cwd(), argv.slice(0, -1));
    expect(text.stdout).toMatch(/removed 3 runs finished before .*\(12 entries, 1 archived batches, 2 blobs/);
    expect(await loom(process.cwd(), [...argv.slice(0, -2), "soon"])).toMatchObject({ code: 2 });
  });

  it("refuses a store that cannot prune, by name", async () => {
    const e = await pruneRuns(createJournal({ store: memoryStore() }), { completedBefore: 0 }).catch((x) => x);
    expect(isPruneNotSupportedError(e)).toBe(true);
  });
});

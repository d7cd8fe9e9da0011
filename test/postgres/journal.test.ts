import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/core/digest.ts";
import { isIntegrityError } from "../../src/core/errors.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { readArchived } from "../../src/events/readArchived.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal, postgresArchive, postgresBlobStore, postgresStore } from "../../src/postgres.ts";
import { rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { frameCompleted, frameStarted } from "../events/entries.ts";
import { countingTools, crashingStore } from "../support/loop.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "./pg.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("postgres journal", () => {
  const url = PG_URL as string;
  const schema = freshSchema("journal");
  let journal: OpenJournal;
  beforeAll(async () => {
    journal = openPostgresJournal(url, { schema });
  });
  afterAll(async () => {
    await journal.close();
    await dropSchema(schema);
  });

  describe("postgresBlobStore", () => {
    it("stores bytes once under their sha256 and gives them back verified", async () => {
      const blobs = journal.blobs!;
      const a = await blobs.put(bytes("big output"));
      expect(a).toEqual({ ref: `sha256:${sha256Hex("big output")}`, size: 10, digest: sha256Hex("big output") });
      expect(await blobs.put(bytes("big output"))).toEqual(a);
      expect(new TextDecoder().decode(await blobs.get(a.ref))).toBe("big output");
      expect(await blobs.has(a.ref)).toBe(true);
      expect(await blobs.has(`sha256:${"0".repeat(64)}`)).toBe(false);
    });

    it("refuses a malformed ref, reports a missing blob, and raises IntegrityError on altered bytes", async () => {
      const blobs = journal.blobs!;
      await expect(blobs.get("sha256:../../etc/passwd")).rejects.toMatchObject({ code: "malformedRef" });
      await expect(blobs.get(`sha256:${"1".repeat(64)}`)).rejects.toMatchObject({ code: "blobMissing" });
      const { ref, digest } = await blobs.put(bytes("honest"));
      await sql(`UPDATE "${schema}".loom_blobs SET bytes = $1 WHERE digest = decode($2, 'hex')`, [
        Buffer.from("forged"),
        digest,
      ]);
      const e = await blobs.get(ref).catch((x: unknown) => x);
      expect(isIntegrityError(e)).toBe(true);
      expect(String(e)).toMatch(/does not match its digest/);
    });
  });

  describe("postgresArchive", () => {
    const frame = {
      frameId: "l#turn:0:tool:0",
      started: { ...frameStarted("l#turn:0:tool:0"), runId: "r", seq: 2, meta: { v: 1, at: "t" } },
      completed: { ...frameCompleted("l#turn:0:tool:0", { z: 1, a: 2 }), runId: "r", seq: 3, meta: { v: 1, at: "t" } },
    } as never;

    it("keeps a batch under a ref derived from its content (idempotent) and checks it on read", async () => {
      const archive = journal.archive!;
      const { ref } = await archive.put("r", [frame]);
      expect((await archive.put("r", [frame])).ref).toBe(ref);
      expect(JSON.stringify(await archive.get(ref))).toBe(JSON.stringify([frame]));
      await expect(archive.get(`sha256:${"2".repeat(64)}`)).rejects.toMatchObject({ code: "archiveMissing" });
      await sql(`UPDATE "${schema}".loom_archive SET body = replace(body, '"z":1', '"z":9') WHERE ref = $1`, [ref]);
      await expect(archive.get(ref)).rejects.toMatchObject({ code: "integrity" });
    });

    it("works as separate parts over separate pools on the same database", async () => {
      const parts = createJournal({
        store: postgresStore(url, { schema }),
        blobs: postgresBlobStore(url, { schema }),
        archive: postgresArchive(url, { schema }),
      });
      expect(await parts.archive!.put("r2", [frame])).toMatchObject({ ref: expect.stringMatching(/^sha256:/) });
      await parts.close();
    });
  });

  describe("a loop on a postgres journal", () => {
    const script = () =>
      scriptedModel([
        { toolCalls: [{ id: "a", name: "add", input: { a: 1, b: 2 } }] },
        {
          toolCalls: [
            { id: "b", name: "echo", input: { text: "x".repeat(300), delayMs: 5 } },
            { id: "c", name: "add", input: { b: 4, a: 3 } },
          ],
        },
        { toolCalls: [{ id: "d", name: "echo", input: { text: "last" } }] },
        { content: "done", toolCalls: [] },
      ]);
    const loopOf = (blobs = journal.blobs!) =>
      agentLoop$({
        id: "pg",
        model: script(),
        tools: countingTools().tools,
        toolCallLog: "lean",
        claimCheck: { blobs, thresholdBytes: 200 },
      });

    it("resumes a completed run to the byte-identical output, calling nothing", async () => {
      const live = await loopOf().run({ runId: "live", input: "hi", journal });
      const model = script();
      const again = agentLoop$({ ...loopOf().config, model });
      const resumed = await again.run({ runId: "live", journal });
      expect(JSON.stringify(resumed)).toBe(JSON.stringify(live));
      expect(model.calls).toBe(0);
    });

    it("finishes a run crashed at every append point to the same output as an uncrashed one", async () => {
      const reference = JSON.stringify(await loopOf().run({ runId: "ref", input: "hi", journal }));
      for (let k = 1; k <= 12; k++) {
        const runId = `crash-${k}`;
        const crashing = { ...journal, store: crashingStore(journal.store, k) };
        await loopOf()
          .run({ runId, input: "hi", journal: crashing })
          .catch(() => {});
        const out = await loopOf().run({ runId, journal });
        expect(JSON.stringify(out)).toBe(reference);
      }
    });

    it("compacts a run and still reads its archived frames and rebuilds its log", async () => {
      await loopOf().run({ runId: "old", input: "hi", journal });
      const before = await rebuildToolCallLog(journal, "old", "full");
      const { frameIds } = await compact(journal, "old", { keepTurns: 2 });
      expect(frameIds).toEqual(["pg#turn:0:tool:0", "pg#turn:1:tool:0", "pg#turn:1:tool:1"]);
      const types = (await readJournal(journal, "old")).map((e) => e.type);
      expect(types.filter((t) => t === "frames.archived")).toHaveLength(1);
      expect(await rebuildToolCallLog(journal, "old", "full")).toEqual(before);
      const frame = await readArchived(journal, "pg#turn:1:tool:1", { runId: "old" });
      expect(frame?.completed.data.output).toEqual({ sum: 7 });
    });
  });
});

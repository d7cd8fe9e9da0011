import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isIntegrityError } from "../../src/core/errors.ts";
import { memoryArchive, sqliteArchive } from "../../src/events/archive.ts";
import type { ArchivedFrame, ArchiveStore } from "../../src/events/spi.ts";
import type { EntryOf } from "../../src/events/types.ts";
import { tempDir } from "./tmp.ts";

const meta = { v: 1, at: "2024-01-01T00:00:00.000Z" };
const frame = (j: number): ArchivedFrame => {
  const frameId = `demo#turn:0:tool:${j}`;
  return {
    frameId,
    started: {
      runId: "r",
      seq: 2 * j + 1,
      type: "frame.started",
      data: { frameId, effect: "tool:x", inputDigest: "0" },
      meta,
    },
    completed: {
      runId: "r",
      seq: 2 * j + 2,
      type: "frame.completed",
      data: { frameId, output: { j } },
      meta,
    } as EntryOf<"frame.completed">,
  };
};

const kinds: { name: string; open: (dir: string) => ArchiveStore; tamper?: (dir: string) => void }[] = [
  { name: "memory", open: () => memoryArchive() },
  {
    name: "sqlite",
    open: (dir) => sqliteArchive(join(dir, "a.db")),
    tamper(dir) {
      const db = new Database(join(dir, "a.db"));
      db.prepare(`UPDATE loom_archive SET body = replace(body, '"j":0', '"j":7')`).run();
      db.close();
    },
  },
];

describe.each(kinds)("$name archive", (kind) => {
  let tmp: ReturnType<typeof tempDir>;
  let archive: ArchiveStore;
  beforeEach(() => {
    tmp = tempDir();
    archive = kind.open(tmp.dir);
  });
  afterEach(async () => {
    await archive.close();
    tmp.remove();
  });

  it("keeps a batch of frames under a ref derived from its content, and gives it back", async () => {
    const { ref } = await archive.put("r", [frame(0), frame(1)]);
    expect(ref).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(await archive.get(ref)).toEqual([frame(0), frame(1)]);
  });

  it("writes the same ref for the same frames, so a retried compaction is harmless", async () => {
    const first = await archive.put("r", [frame(0)]);
    expect(await archive.put("r", [frame(0)])).toEqual(first);
    expect((await archive.put("r", [frame(1)])).ref).not.toBe(first.ref);
  });

  it("refuses a malformed ref and reports a missing batch", async () => {
    await expect(archive.get("sha256:../../etc/passwd")).rejects.toMatchObject({ code: "malformedRef" });
    await expect(archive.get(`sha256:${"0".repeat(64)}`)).rejects.toMatchObject({ code: "archiveMissing" });
  });

  const tamper = kind.tamper;
  if (tamper !== undefined) {
    it("raises IntegrityError when a stored batch was altered", async () => {
      const { ref } = await archive.put("r", [frame(0)]);
      tamper(tmp.dir);
      const e = await archive.get(ref).catch((x: unknown) => x);
      expect(isIntegrityError(e)).toBe(true);
      expect((e as Error).message).toContain(ref);
    });
  }
});

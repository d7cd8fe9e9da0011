import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isLoomError } from "../../src/core/errors.ts";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { isJournalFileError, JournalFileError } from "../../src/events/sqlite/sqliteOpen.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

/**
 * A SQLite journal on a disk that fills up mid-run: a small tmpfs mounted for the test (which
 * needs root and a kernel that lets it mount one; without them the suite is skipped, saying why).
 */

const MB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "loom-disk-full-"));

/** Why the suite cannot run here, or undefined once a 2 MB tmpfs is mounted at `dir`. */
function mountSmallDisk(): string | undefined {
  if (process.platform !== "linux") return "a tmpfs mount needs Linux";
  if (process.getuid?.() !== 0) return "mounting a tmpfs needs root";
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", dir], { stdio: "pipe" });
    return undefined;
  } catch (e) {
    return `mount -t tmpfs failed: ${e instanceof Error ? e.message : String(e)}`;
  }
}

const cannot = mountSmallDisk();
if (cannot !== undefined) console.warn(`sqlite disk-full suite skipped: ${cannot}`);

afterAll(() => {
  if (cannot === undefined) execFileSync("umount", [dir]);
  rmSync(dir, { recursive: true, force: true });
});

const TURNS = 40;
/** Each tool output's size: the 40 turns need about 2.5 MB, more than the disk has. */
const OUTPUT = 64 * 1024;

/** A loop whose tool returns `OUTPUT` bytes a turn, noting each call it runs. */
function bigOutputLoop(calls: number[]) {
  const model = scriptedModel(({ turn }) =>
    turn < TURNS
      ? { toolCalls: [{ id: `c${turn}`, name: "fill", input: { n: turn } }] }
      : { content: "done", toolCalls: [] },
  );
  return agentLoop$({
    id: "disk",
    model,
    tools: {
      fill: {
        description: "returns a large text",
        execute: (input: { n: number }) => {
          calls.push(input.n);
          return { n: input.n, text: `${input.n}`.padEnd(OUTPUT, "x") };
        },
      },
    },
    maxIterations: TURNS + 1,
  });
}

const facts = (entries: readonly JournalEntry[]) => entries.map((e) => JSON.stringify([e.seq, e.type, e.data]));

describe.skipIf(cannot !== undefined)("a SQLite journal on a full disk", () => {
  it("the append that finds the disk full raises a diskFull JournalFileError naming the run, keeps what was journaled, and the run resumes once space returns", async () => {
    const file = join(dir, "loom.db");
    const calls: number[] = [];
    let journal = openSqliteJournal(file);
    let before: string[] = [];
    try {
      const error = await bigOutputLoop(calls)
        .run({ runId: "big", journal, input: "go" })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error, "the run must stop on the full disk").toBeInstanceOf(JournalFileError);
      expect(isJournalFileError(error) && isLoomError(error)).toBe(true);
      const full = error as JournalFileError;
      expect(full.code).toBe("diskFull");
      expect(full.path).toBe(file);
      expect(full.message).toMatch(/^run big: /);
      expect(full.message).toMatch(/disk is full/);
      expect(full.message).toContain(file);
      expect(full.message).toMatch(/free space.*resume/i);
      before = facts(await readJournal(journal, "big"));
      expect(before.length).toBeGreaterThan(4);
    } finally {
      await journal.close();
    }
    const free = statfsSync(dir);
    const bytesBefore = free.blocks * free.bsize;

    // Space returns: the disk is made bigger (as freeing a filler file would). A new process reopens the file.
    execFileSync("mount", ["-o", "remount,size=16m", dir]);
    journal = openSqliteJournal(file);
    try {
      expect(facts(await readJournal(journal, "big")), "nothing journaled before the full disk is lost").toEqual(
        before,
      );
      const ranBefore = calls.length;
      const out = await bigOutputLoop(calls).run({ runId: "big", journal, input: "go" });
      expect(out.content).toBe("done");
      expect(out.toolCallLog).toHaveLength(TURNS);
      const after = facts(await readJournal(journal, "big"));
      expect(after.slice(0, before.length)).toEqual(before);
      // No completed tool call ran again: each turn's call ran once, but the one whose completion the disk refused.
      const completedBefore = before.filter((f) => f.includes('"frame.completed"') && f.includes(":tool:")).length;
      expect(calls.slice(ranBefore).every((n) => n >= completedBefore)).toBe(true);
      expect(new Set(calls).size).toBe(TURNS);
      console.info(
        `disk full: ${bytesBefore} bytes of tmpfs, ${before.length} entries kept, ${completedBefore} tool calls completed before, ${calls.length - TURNS} run again`,
      );
    } finally {
      await journal.close();
    }
  }, 60_000);

  it("an append on a disk another file filled raises diskFull naming the run, and the store takes it once the filler is deleted", async () => {
    execFileSync("mount", ["-o", "remount,size=16m", dir]);
    const file = join(dir, "second.db");
    const journal = openSqliteJournal(file);
    try {
      await journal.store.append("r", [{ type: "run.started", data: { loopId: "x", input: "go", tools: [] } }], {
        expectedVersion: 0,
      } as never);
      const { bavail, bsize } = statfsSync(dir);
      const filler = join(dir, "filler");
      writeFileSync(filler, Buffer.alloc(Math.max(0, bavail * bsize - 4096)));
      const big = { type: "decision.recorded", data: { decisionId: "d", source: "test", choice: "y".repeat(MB) } };
      const error = await journal.store.append("r", [big as never], { expectedVersion: 1 }).catch((e: unknown) => e);
      expect(isJournalFileError(error) && error.code === "diskFull").toBe(true);
      expect((error as JournalFileError).message).toMatch(/^run r: appending 1 entries after seq 1 .*disk is full/);
      // A claim-checked output that does not fit: the blob store says the disk is full too.
      await expect(journal.blobs?.put(new Uint8Array(MB))).rejects.toMatchObject({
        code: "diskFull",
        message: expect.stringMatching(/second\.db: the disk is full/),
      });
      // A new journal file on the full disk is refused at open, naming the file.
      expect(() => openSqliteJournal(join(dir, "third.db"))).toThrow(
        expect.objectContaining({ code: "diskFull", message: expect.stringMatching(/third\.db: the disk is full/) }),
      );
      rmSync(filler);
      expect(await journal.store.append("r", [big as never], { expectedVersion: 1 })).toEqual({ version: 2 });
      expect((await journal.store.read("r")).map((e) => e.seq)).toEqual([1, 2]);
    } finally {
      await journal.close();
    }
  });
});

import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/core/digest.ts";
import {
  isIntegrityError,
  isJournalFormatError,
  isReplayDivergenceError,
  type JournalFormatError,
} from "../../src/core/errors.ts";
import { compact } from "../../src/events/compact.ts";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import type { ArchivedFrame, BlobStore } from "../../src/events/spi.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { rebuildToolCallLog, resolveStep } from "../../src/runtime/base/readers.ts";
import { tempDir } from "../events/tmp.ts";
import { kitchenSink } from "../support/kitchenSink.ts";

/**
 * Damage to a SQLite journal between two runs of a process: the resume must refuse with
 * `JournalFormatError` or `IntegrityError` naming the run and the seq (or the ref), and append
 * nothing. Each case records a run that stopped at its iteration limit (so a resume would go on
 * and append), damages the file with plain SQL, then resumes from a freshly opened journal.
 */

const RUN = "tampered";
const TURNS = 6;
const STOP_AFTER = 4; // model calls before the recorded run stops

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-tampering-");
});
afterAll(() => tmp.remove());

const damageKinds: string[] = [];

let files = 0;
/** A run recorded up to its iteration limit in a fresh file (lean pinned, so a resume appends no pin). */
async function recordedRun(): Promise<{ path: string; entries: JournalEntry[] }> {
  const path = tmp.file(`journal-${files++}.db`);
  const journal = openSqliteJournal(path);
  try {
    const { loop } = kitchenSink({
      turns: TURNS,
      mode: "lean",
      blobs: journal.blobs as BlobStore,
      maxIterations: STOP_AFTER,
    });
    const stopped = await loop.run({ runId: RUN, input: "go", journal }).catch((e: unknown) => e);
    if (!isAgentInterruptedError(stopped)) throw stopped;
    expect(stopped.run.reason).toBe("max-iterations");
    return { path, entries: await readJournal(journal, RUN) };
  } finally {
    await journal.close();
  }
}

function withDb<T>(path: string, f: (db: Database.Database) => T): T {
  const db = new Database(path);
  try {
    return f(db);
  } finally {
    db.close();
  }
}

const rowCount = (path: string) =>
  withDb(path, (db) => db.prepare("SELECT count(*) FROM loom_journal WHERE run_id = ?").pluck().get(RUN) as number);

/** The key of the run in the SQLite file's loom_runs (rows of loom_entries hold the key, not the id). */
const RUN_KEY = "(SELECT run FROM loom_runs WHERE run_id = ?)";

/** Resumes the run from a freshly opened journal (as a new process would): what it throws, and that it appended nothing. */
async function resumeAfterDamage(path: string): Promise<unknown> {
  const before = rowCount(path);
  const journal = openSqliteJournal(path);
  let thrown: unknown;
  try {
    const { loop } = kitchenSink({ turns: TURNS, mode: "lean", blobs: journal.blobs as BlobStore });
    thrown = await loop.run({ runId: RUN, journal }).then(
      () => new Error("the damaged run completed"),
      (e: unknown) => e,
    );
  } finally {
    await journal.close();
  }
  expect(rowCount(path), "rows after the refused resume").toBe(before);
  return thrown;
}

const seqOf = (entries: JournalEntry[], match: (e: JournalEntry) => boolean): number => {
  const entry = entries.find(match);
  if (!entry) throw new Error("no such entry in the recorded run");
  return entry.seq;
};
const completionOf = (frameId: string) => (e: JournalEntry) =>
  e.type === "frame.completed" && e.data.frameId === frameId;

function expectFormatError(thrown: unknown, seq: number, field: string): JournalFormatError {
  if (!isJournalFormatError(thrown)) throw thrown;
  expect(thrown.runId).toBe(RUN);
  expect(thrown.seq).toBe(seq);
  expect(thrown.field).toBe(field);
  expect(thrown.message).toContain(`run ${RUN} seq ${seq} (${field})`);
  return thrown;
}

describe("a damaged journal row is refused before anything is appended (JournalFormatError naming run, seq, field)", () => {
  it("a truncated row (its JSON text cut in half)", async () => {
    damageKinds.push("truncated row text");
    const { path, entries } = await recordedRun();
    const seq = seqOf(entries, completionOf("sink#turn:1:tool:0"));
    withDb(path, (db) =>
      db
        .prepare(`UPDATE loom_entries SET data = substr(data, 1, length(data) / 2) WHERE run = ${RUN_KEY} AND seq = ?`)
        .run(RUN, seq),
    );
    const e = expectFormatError(await resumeAfterDamage(path), seq, "data");
    expect(e.message).toMatch(/not JSON.*damaged/);
  });

  it("a row that lost a field (still JSON; the model frame.started kept whole in data, without inputDigest)", async () => {
    damageKinds.push("row missing a field");
    const { path, entries } = await recordedRun();
    const seq = seqOf(entries, (e) => e.type === "frame.started" && e.data.frameId === "sink#turn:2:model");
    withDb(path, (db) =>
      db
        .prepare(
          `UPDATE loom_entries SET data = json_object('frameId', frame, 'effect', effect), frame = NULL, effect = NULL, digest = NULL
            WHERE run = ${RUN_KEY} AND seq = ?`,
        )
        .run(RUN, seq),
    );
    expectFormatError(await resumeAfterDamage(path), seq, "data.inputDigest");
  });

  it("an unknown entry type", async () => {
    damageKinds.push("unknown type");
    const { path, entries } = await recordedRun();
    const seq = seqOf(entries, (e) => e.type === "call.settled");
    withDb(path, (db) =>
      db.prepare(`UPDATE loom_entries SET type = 42 WHERE run = ${RUN_KEY} AND seq = ?`).run(RUN, seq),
    );
    const e = expectFormatError(await resumeAfterDamage(path), seq, "type");
    expect(e.message).toContain("unknown entry type code 42");
  });

  it("a future schema version", async () => {
    damageKinds.push("future schema version");
    const { path, entries } = await recordedRun();
    const seq = seqOf(entries, completionOf("sink#turn:2:model"));
    withDb(path, (db) => db.prepare(`UPDATE loom_entries SET v = 2 WHERE run = ${RUN_KEY} AND seq = ?`).run(RUN, seq));
    const e = expectFormatError(await resumeAfterDamage(path), seq, "meta.v");
    expect(e.message).toMatch(/schema version 2 is newer.*upgrade Loom/);
  });

  it("a deleted entry (a seq gap no compaction accounts for)", async () => {
    damageKinds.push("deleted entry (seq gap)");
    const { path, entries } = await recordedRun();
    const seq = seqOf(entries, (e) => e.type === "call.settled" && e.data.stepId.startsWith("sink#turn:1:"));
    withDb(path, (db) => db.prepare(`DELETE FROM loom_entries WHERE run = ${RUN_KEY} AND seq = ?`).run(RUN, seq));
    const e = expectFormatError(await resumeAfterDamage(path), seq, "seq");
    expect(e.message).toContain(`entries ${seq}–${seq} are missing`);
  });
});

describe("an output whose digest no longer vouches for it is refused before anything is appended (IntegrityError)", () => {
  /** Compacts the recorded run (tool frames of all but the last turn go to the archive). */
  async function compacted(): Promise<{ path: string; ref: string; markerSeq: number }> {
    const { path } = await recordedRun();
    const journal = openSqliteJournal(path);
    try {
      const { archiveRef, version } = await compact(journal, RUN, { keepTurns: 1 });
      if (archiveRef === undefined) throw new Error("nothing was compacted");
      return { path, ref: archiveRef, markerSeq: version };
    } finally {
      await journal.close();
    }
  }

  const edited = "sink#turn:1:tool:0";
  const editBody = (body: string): string => {
    const frames = JSON.parse(body) as ArchivedFrame[];
    const frame = frames.find((f) => f.frameId === edited);
    if (!frame) throw new Error(`${edited} was not archived`);
    (frame.completed.data.output as { body: string }).body = "an edited page";
    return JSON.stringify(frames);
  };

  it("an archived frame's output edited after compaction, the batch re-hashed and the marker re-pointed: the marker's digest catches it", async () => {
    damageKinds.push("archived output edited (batch re-hashed)");
    const { path, ref, markerSeq } = await compacted();
    const newRef = withDb(path, (db) => {
      const body = db.prepare("SELECT body FROM loom_archive WHERE ref = ?").pluck().get(ref) as string;
      const newBody = editBody(body);
      const newRef = `sha256:${sha256Hex(newBody)}`;
      db.prepare("UPDATE loom_archive SET ref = ?, body = ? WHERE ref = ?").run(newRef, newBody, ref);
      db.prepare(`UPDATE loom_entries SET data = replace(data, ?, ?) WHERE run = ${RUN_KEY} AND seq = ?`).run(
        ref,
        newRef,
        RUN,
        markerSeq,
      );
      return newRef;
    });
    const e = await resumeAfterDamage(path);
    if (!isIntegrityError(e)) throw e;
    expect(e.message).toContain(`run ${RUN}: archived frame ${edited} (archive sha256:`);
    expect(e.message).toMatch(/frames\.archived marker records; the archive was altered/);
    // The readers refuse it too: the full log, and the step itself.
    const journal = openSqliteJournal(path);
    try {
      await expect(rebuildToolCallLog(journal, RUN, "full")).rejects.toSatisfy(isIntegrityError);
      await expect(resolveStep(journal, edited, { runId: RUN })).rejects.toThrow(
        new RegExp(`run ${RUN} step ${edited} \\(frames.archived at seq ${markerSeq}, archive ${newRef}\\)`),
      );
    } finally {
      await journal.close();
    }
  });

  it("an archived frame's output edited in place: the batch no longer hashes to its ref", async () => {
    damageKinds.push("archived output edited in place");
    const { path, ref } = await compacted();
    withDb(path, (db) => {
      const body = db.prepare("SELECT body FROM loom_archive WHERE ref = ?").pluck().get(ref) as string;
      db.prepare("UPDATE loom_archive SET body = ? WHERE ref = ?").run(editBody(body), ref);
    });
    const e = await resumeAfterDamage(path);
    if (!isIntegrityError(e)) throw e;
    expect(e.message).toContain(`archive batch ${ref}`);
    expect(e.message).toMatch(/does not match its hash; it was altered/);
  });

  it("claim-checked blobs with their bytes swapped: each blob is checked against its ref", async () => {
    damageKinds.push("claim-checked blob bytes swapped");
    const { path, entries } = await recordedRun();
    const refs = entries.flatMap((e) =>
      e.type === "frame.completed" && (e.data.output as { __loomClaimCheck?: 1 } | undefined)?.__loomClaimCheck === 1
        ? [(e.data.output as { ref: string }).ref]
        : [],
    );
    expect(refs.length).toBeGreaterThanOrEqual(2);
    const [a, b] = refs.map((r) => r.slice("sha256:".length)) as [string, string];
    withDb(path, (db) => {
      const get = db.prepare("SELECT bytes FROM loom_blobs WHERE digest = ?").pluck();
      const set = db.prepare("UPDATE loom_blobs SET bytes = ? WHERE digest = ?");
      const [bytesA, bytesB] = [get.get(a) as Buffer, get.get(b) as Buffer];
      db.transaction(() => {
        set.run(bytesB, a);
        set.run(bytesA, b);
      })();
    });
    const e = await resumeAfterDamage(path);
    if (!isIntegrityError(e)) throw e;
    expect(e.message).toMatch(
      new RegExp(
        `^run ${RUN} step sink#turn:\\d+:tool:\\d+: .*blob sha256:(${a}|${b}) .*does not match its digest.*altered or swapped`,
      ),
    );
    const journal = openSqliteJournal(path);
    try {
      await expect(resolveStep(journal, "sink#turn:0:tool:0", { runId: RUN })).rejects.toSatisfy(isIntegrityError);
    } finally {
      await journal.close();
    }
  });

  it("a hot tool output edited: the next model frame's prompt digest no longer matches (ReplayDivergenceError)", async () => {
    damageKinds.push("hot output edited (prompt digest)");
    const { path, entries } = await recordedRun();
    const seq = seqOf(entries, completionOf(edited));
    withDb(path, (db) =>
      db
        .prepare(
          // The row's data is `<bytes>,"output":<output JSON>`: edit the output, keep the rest.
          `UPDATE loom_entries SET data = substr(data, 1, instr(data, ',"output":') + 9)
              || json_set(substr(data, instr(data, ',"output":') + 10), '$.body', 'an edited page')
            WHERE run = ${RUN_KEY} AND seq = ?`,
        )
        .run(RUN, seq),
    );
    const e = await resumeAfterDamage(path);
    if (!isReplayDivergenceError(e)) throw e;
    expect(e.runId).toBe(RUN);
    expect(e.frameId).toBe("sink#turn:2:model");
  });
});

afterAll(() => {
  console.log(
    `tampering: ${damageKinds.length} damage kinds tried, each refused with no append: ${damageKinds.join("; ")}`,
  );
});

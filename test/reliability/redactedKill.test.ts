import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { forgetRedactedOriginals } from "../../src/events/redaction/redactedResume.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { isRedactedHistoryError, type RedactedHistoryError } from "../../src/runtime/base/errors.ts";
import { rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { tempDir } from "../events/tmp.ts";
import { startWorker } from "../support/processes.ts";
import { INPUT, redactedJournal, redactedLoop, SSN } from "./fixtures/redactedLoop.ts";

/**
 * Crash recovery under redaction: a run on a gzip+AES SQLite journal with `$..ssn` redacted and
 * originals kept is killed with SIGKILL in a tool call; a new process resumes it. The resume feeds
 * the model what it was fed live (its prompt digests are an unredacted run's), does not run the
 * lookups that completed again, and the journal, the log and the rebuilt log hold no SSN. Once
 * the run's key is forgotten, the resume of a killed run is refused before anything is appended.
 */

const worker = fileURLToPath(new URL("./fixtures/redactedWorker.ts", import.meta.url));
const keyHex = randomBytes(32).toString("hex");
const SSNS = [0, 1, 2].map(SSN);

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-redacted-kill-");
});
afterAll(() => tmp.remove());

/** Starts the run in a child process and kills it with SIGKILL in the lookup of customer 2. */
async function killedInLookup(db: string, runId: string, execLog: string): Promise<void> {
  const child = startWorker(worker, [db, runId, keyHex, execLog, "2"]);
  await child.waitFor((line) => line === "lookup 2", "the lookup of customer 2");
  child.child.kill("SIGKILL");
  expect((await child.exited).signal).toBe("SIGKILL");
}

const promptDigests = (entries: readonly JournalEntry[]) =>
  entries.flatMap((e) => (e.type === "frame.started" && e.data.frameId.endsWith(":model") ? [e.data.inputDigest] : []));

describe("a redacted run (gzip+AES on SQLite, originals kept) killed with SIGKILL", () => {
  it("resumes from another process: the model is fed the originals, no completed lookup runs again, nothing shows an SSN", async () => {
    const db = tmp.file("kill.db");
    const execLog = tmp.file("kill.exec");
    await killedInLookup(db, "r1", execLog);

    const file = openSqliteJournal(db);
    try {
      const journal = redactedJournal(file, keyHex);
      const before = JSON.stringify(await readJournal(journal, "r1"));
      for (const ssn of SSNS) expect(before, ssn).not.toContain(ssn);
      expect(before).toContain('"ssn":"[redacted]"');

      const out = await redactedLoop(execLog).run({ runId: "r1", journal });
      expect(out.content).toBe("all three checked");
      // Lookups 0 and 1 completed before the kill: served from the journal, not run again.
      expect(readFileSync(execLog, "utf8").trim().split("\n")).toEqual(["0", "1", "2", "2"]);

      const reference = createJournal({ store: memoryStore({ json: true }) });
      await redactedLoop(tmp.file("ref.exec")).run({ runId: "ref", input: INPUT, journal: reference });
      expect(promptDigests(await readJournal(journal, "r1"))).toEqual(
        promptDigests(await readJournal(reference, "ref")),
      );

      const rebuilt = await rebuildToolCallLog(journal, "r1", "full");
      expect(JSON.stringify(out.toolCallLog)).toBe(JSON.stringify(rebuilt));
      const seen = JSON.stringify([
        out.toolCallLog,
        rebuilt,
        await readJournal(journal, "r1"),
        await file.store.read("r1"),
      ]);
      for (const ssn of SSNS) expect(seen, ssn).not.toContain(ssn);
    } finally {
      await file.close();
    }
  });

  it("once its key is forgotten, the resume is refused (RedactedHistoryError, forgotten) and nothing is appended", async () => {
    const db = tmp.file("forgot.db");
    await killedInLookup(db, "r2", tmp.file("forgot.exec"));
    const file = openSqliteJournal(db);
    try {
      const journal = redactedJournal(file, keyHex);
      expect(await forgetRedactedOriginals(journal, "r2")).toEqual(["r2"]);
      const entries = (await file.store.read("r2")).length;
      const e = (await redactedLoop(tmp.file("forgot2.exec"))
        .run({ runId: "r2", journal })
        .catch((err: unknown) => err)) as RedactedHistoryError;
      expect([isRedactedHistoryError(e), e.why]).toEqual([true, "forgotten"]);
      expect((await file.store.read("r2")).length).toBe(entries);
    } finally {
      await file.close();
    }
  });
});

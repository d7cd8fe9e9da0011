import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { memoryArchive } from "../../src/events/archive.ts";
import { payloadCodec, staticKeys } from "../../src/events/codec/codec.ts";
import { withCodec } from "../../src/events/codec/codecStore.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { redaction, withRedaction } from "../../src/events/redaction/redact.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { JournalEntry, RunStartedData } from "../../src/events/types.ts";
import { forkRun, type Journal, runConversation, sessionHistory } from "../../src/index.ts";
import { isSessionHistoryError, type SessionHistoryError } from "../../src/journal.ts";
import { foldRun } from "../../src/runtime/base/readers.ts";
import { sessionLoop } from "../fixtures/sessionLoop.ts";
import { jsonJournal } from "../support/loop.ts";

/**
 * A session in linear space: each message's run journals its new message and names the history
 * before it. Readers rebuild the history from the names (checked against their digests), a
 * process that never read the session (a cold view of the same store) reads the same, and a
 * session journaled the old way (the whole history copied into each input) still reads, resumes
 * and goes on.
 */

const TOPICS = ["tides", "moons", "orbits", "comets"];

/** The same store seen by another process: nothing it rebuilt in memory is shared. */
const coldView = (store: EventStore): EventStore => Object.create(store) as EventStore;

const startedOf = async (journal: Journal, runId: string) =>
  (await readJournal(journal, runId))[0]?.data as RunStartedData;

/** Sends each topic to session `s` the new way (`loop.send`). */
async function sendAll(journal: Journal, topics = TOPICS) {
  const loop = sessionLoop();
  for (const message of topics) await loop.send({ sessionId: "s", journal, message });
}

/** Journals each topic to session `s` the old way: each run started with the whole history copied. */
async function sendAllOldWay(journal: Journal, topics = TOPICS) {
  const loop = sessionLoop();
  for (const [n, message] of topics.entries()) {
    const history = await sessionHistory(journal, "s"); // a new array: nothing names it
    await loop.run({ runId: `s/${n}`, journal, input: [...history, { role: "user", content: message }] });
  }
}

/** Each run's model frames' prompt digests, in journal order. */
async function promptDigests(journal: Journal, runIds: readonly string[]): Promise<string[][]> {
  const out: string[][] = [];
  for (const runId of runIds) {
    const entries = await readJournal(journal, runId);
    out.push(
      entries.flatMap((e: JournalEntry) =>
        e.type === "frame.started" && e.data.frameId.includes(":model") ? [e.data.inputDigest] : [],
      ),
    );
  }
  return out;
}

const RUNS = TOPICS.map((_, n) => `s/${n}`);

describe("sessions in linear space", () => {
  it("journals each message's run with its new message only, naming the history before it", async () => {
    const journal = jsonJournal();
    await sendAll(journal);
    expect((await startedOf(journal, "s/0")).continues).toBeUndefined();
    for (let n = 1; n < TOPICS.length; n++) {
      const started = await startedOf(journal, `s/${n}`);
      expect(started.input).toEqual([{ role: "user", content: TOPICS[n] }]);
      expect(started.continues).toMatchObject({
        runId: `s/${n - 1}`,
        seq: (await foldRun(journal, `s/${n - 1}`)).version,
        messages: 4 * n, // each message: the user's, the tool call, its result, the answer
      });
    }
    // What a run journals does not grow with the session: the fourth message stores what the second does.
    const size = async (runId: string) => JSON.stringify(await readJournal(journal, runId)).length;
    expect(await size("s/3")).toBeLessThan((await size("s/1")) + 40);
    const history = await sessionHistory(journal, "s");
    expect(history.filter((m) => m.role === "user").map((m) => (m as { content: string }).content)).toEqual(TOPICS);
    expect(await sessionHistory(createJournal({ store: coldView(journal.store) }), "s")).toEqual(history);
  });

  it("reads a history again from memory only while nothing moved: another process's message is seen", async () => {
    const journal = jsonJournal();
    await sendAll(journal, TOPICS.slice(0, 2));
    const first = await sessionHistory(journal, "s");
    expect(await sessionHistory(journal, "s")).toEqual(first);
    // Another process (another view of the store) sends the next message: this one sees it.
    await sessionLoop().send({
      sessionId: "s",
      journal: createJournal({ store: coldView(journal.store) }),
      message: "orbits",
    });
    const after = await sessionHistory(journal, "s");
    expect(after.slice(0, first.length)).toEqual(first);
    expect(after).toHaveLength(12);
    // A caller changing the array it was given changes nothing kept.
    after.length = 0;
    expect(await sessionHistory(journal, "s")).toHaveLength(12);
  });

  it("records the prompts and conversations the old storage recorded", async () => {
    const linear = jsonJournal();
    const old = jsonJournal();
    await sendAll(linear);
    await sendAllOldWay(old);
    expect((await startedOf(old, "s/3")).input).toHaveLength(13);
    expect(await promptDigests(linear, RUNS)).toEqual(await promptDigests(old, RUNS));
    for (const runId of RUNS) expect(await runConversation(linear, runId)).toEqual(await runConversation(old, runId));
    expect(await sessionHistory(linear, "s")).toEqual(await sessionHistory(old, "s"));
  });

  it("reads, resumes and goes on with a session journaled the old way", async () => {
    const journal = jsonJournal();
    await sendAllOldWay(journal, TOPICS.slice(0, 2));
    const loop = sessionLoop();
    // The next message names the old run's history (copied in its input) and goes on from it.
    const reply = await loop.send({ sessionId: "s", journal, message: "orbits" });
    expect(reply.content).toBe('#3 orbits: {"note":"notes on orbits"}');
    expect((await startedOf(journal, "s/2")).continues).toMatchObject({ runId: "s/1", messages: 8 });
    // A message stopped by its budget, resumed by a process that never read the session.
    const stopped = await loop
      .send({ sessionId: "s", journal, message: "comets", budget: { modelCalls: 1 } })
      .catch((e: unknown) => e);
    expect(stopped).toMatchObject({ code: "agentInterrupted" });
    const cold = createJournal({ store: coldView(journal.store) });
    expect((await sessionLoop().run({ runId: "s/3", journal: cold })).content).toBe(
      '#4 comets: {"note":"notes on comets"}',
    );
    const fresh = jsonJournal();
    await sendAll(fresh);
    expect(await promptDigests(journal, RUNS)).toEqual(await promptDigests(fresh, RUNS));
    expect(await sessionHistory(cold, "s")).toEqual(await sessionHistory(fresh, "s"));
  });

  it("resumes a stopped message on exactly the history it started with, in a process that never read it", async () => {
    const journal = jsonJournal();
    await sendAll(journal, TOPICS.slice(0, 3));
    await sessionLoop()
      .send({ sessionId: "s", journal, message: "comets", budget: { modelCalls: 1 } })
      .catch(() => {});
    const cold = createJournal({ store: coldView(journal.store) });
    await sessionLoop().run({ runId: "s/3", journal: cold, budget: { modelCalls: 10 } });
    const whole = jsonJournal();
    await sendAll(whole);
    expect(await promptDigests(journal, RUNS)).toEqual(await promptDigests(whole, RUNS));
  });

  it("refuses a history whose run is not in the journal: SessionHistoryError historyMissing", async () => {
    const journal = jsonJournal();
    await sendAll(journal, TOPICS.slice(0, 3));
    const copy = jsonJournal();
    for (const runId of ["s/1", "s/2"]) {
      const entries = await journal.store.read(runId);
      await copy.store.append(runId, entries, { expectedVersion: 0 });
    }
    const e = (await sessionHistory(copy, "s").catch((e: unknown) => e)) as SessionHistoryError;
    expect(isSessionHistoryError(e)).toBe(true);
    expect(e).toMatchObject({ code: "historyMissing", runId: "s/1", continues: { runId: "s/0", messages: 4 } });
    expect(e.message).toContain("Restore run s/0");
    await expect(sessionLoop().send({ sessionId: "s", journal: copy, message: "comets" })).rejects.toMatchObject({
      code: "historyMissing",
    });
  });

  it("refuses a history whose run was altered: SessionHistoryError historyChanged", async () => {
    const journal = jsonJournal();
    await sendAll(journal, TOPICS.slice(0, 3));
    const copy = jsonJournal();
    for (const runId of RUNS.slice(0, 3)) {
      const entries = (await journal.store.read(runId)).map((e) =>
        runId === "s/0" && e.type === "frame.completed" && e.data.frameId === "chat#turn:0:tool:0"
          ? ({ ...e, data: { ...e.data, output: { note: "notes on something else" } } } as JournalEntry)
          : e,
      );
      await copy.store.append(runId, entries, { expectedVersion: 0 });
    }
    await expect(sessionHistory(copy, "s")).rejects.toMatchObject({
      code: "historyChanged",
      runId: "s/1",
      continues: { runId: "s/0" },
    });
  });

  it("reads a history across a compaction: the compacted message's outputs come back from the archive", async () => {
    const journal = createJournal({ store: memoryStore({ json: true }), archive: memoryArchive() });
    await sendAll(journal, TOPICS.slice(0, 3));
    const before = await sessionHistory(journal, "s");
    for (const runId of RUNS.slice(0, 3)) {
      expect((await compact(journal, runId, { keepTurns: 0 })).frameIds).toEqual(["chat#turn:0:tool:0"]);
    }
    const cold = createJournal({ store: coldView(journal.store), archive: journal.archive });
    expect(await sessionHistory(cold, "s")).toEqual(before);
    expect((await sessionLoop().send({ sessionId: "s", journal: cold, message: "comets" })).content).toBe(
      '#4 comets: {"note":"notes on comets"}',
    );
    // Without the archive the compacted outputs cannot be read back: refused, not guessed.
    await expect(sessionHistory(createJournal({ store: coldView(journal.store) }), "s")).rejects.toMatchObject({
      code: "archiveMissing",
    });
  });

  it("keeps the history beside a codec and redaction: the message encrypted, the name in clear", async () => {
    const codec = payloadCodec({ encrypt: { keys: staticKeys({ current: "k1", keys: { k1: randomBytes(32) } }) } });
    const store = memoryStore({ json: true });
    const open = () =>
      withRedaction(
        withCodec(createJournal({ store: coldView(store), archive: memoryArchive() }), codec),
        redaction({ values: [/notes on moons/] }),
      );
    const journal = open();
    await sendAll(journal, TOPICS.slice(0, 3));
    const raw = (await store.read("s/2"))[0]?.data as unknown as { input: unknown; continues: unknown };
    expect(JSON.stringify(raw.input)).not.toContain("orbits"); // encrypted
    expect(raw.continues).toMatchObject({ runId: "s/1", messages: 8 });
    const history = await sessionHistory(open(), "s");
    expect(history).toEqual(await sessionHistory(journal, "s"));
    expect(JSON.stringify(history)).not.toContain("notes on moons"); // as the journal keeps it: redacted
    expect(history.filter((m) => m.role === "user")).toHaveLength(3);
    const next = await sessionLoop().send({ sessionId: "s", journal: open(), message: "comets" });
    expect(next.content).toBe('#4 comets: {"note":"notes on comets"}');
  });

  it("forks a message's run with the name: the fork goes on from the same history", async () => {
    const journal = jsonJournal();
    await sendAll(journal, TOPICS.slice(0, 3));
    await forkRun(journal, "s/2", { at: "chat#turn:1:model", newRunId: "s/2-retry" });
    expect((await startedOf(journal, "s/2-retry")).continues).toEqual((await startedOf(journal, "s/2")).continues);
    const out = await sessionLoop().run({ runId: "s/2-retry", journal });
    expect(out.content).toBe('#3 orbits: {"note":"notes on orbits"}');
    expect(await runConversation(journal, "s/2-retry")).toEqual(await runConversation(journal, "s/2"));
  });
});

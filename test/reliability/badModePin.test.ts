import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isJournalFormatError, type JournalFormatError } from "../../src/core/errors.ts";
import { createJournal, openSqliteJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { ToolCallLogMode } from "../../src/projections/types.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { foldRun, rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";

/**
 * A mode pin whose recorded mode is not "full" or "lean" (a damaged or foreign journal): every
 * reader refuses the run with JournalFormatError naming the run, the pin's seq and its decision
 * id, and a resume (with the mode unset, or set) appends nothing: no second pin, no shape flip.
 */

const RUN = "pinned";
const PIN = "pin#toolCallLog";

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-bad-pin-");
});
afterAll(() => tmp.remove());

const loopOf = (mode: ToolCallLogMode | undefined, maxIterations?: number) =>
  agentLoop$({
    id: "pin",
    model: scriptedModel([
      { toolCalls: [{ id: "c0", name: "add", input: { a: 1, b: 2 } }] },
      { toolCalls: [{ id: "c1", name: "add", input: { a: 3, b: 4 } }] },
      { content: "done", toolCalls: [] },
    ]),
    tools: { add: { description: "adds", execute: (i: { a: number; b: number }) => ({ sum: i.a + i.b }) } },
    ...(mode ? { toolCallLog: mode } : {}),
    ...(maxIterations ? { maxIterations } : {}),
  });

/** A lean run stopped after its first model call (so a resume would append). */
async function recordStopped(journal: Journal): Promise<void> {
  const stopped = await loopOf("lean", 1)
    .run({ runId: RUN, input: "go", journal })
    .catch((e: unknown) => e);
  if (!isAgentInterruptedError(stopped)) throw stopped;
}

function expectPinError(thrown: unknown, seq: number): JournalFormatError {
  if (!isJournalFormatError(thrown)) throw thrown ?? new Error("nothing was thrown");
  expect(thrown.runId).toBe(RUN);
  expect(thrown.seq).toBe(seq);
  expect(thrown.message).toContain(PIN);
  expect(thrown.message).toContain(`run ${RUN} seq ${seq}`);
  return thrown;
}

/** Resumes with the mode unset and set, rebuilds the log and folds: all refused, nothing appended. */
async function expectRefusedEverywhere(journal: Journal, seq: number, count: () => Promise<number>) {
  const before = await count();
  for (const mode of [undefined, "lean", "full"] as const) {
    expectPinError(
      await loopOf(mode)
        .run({ runId: RUN, journal })
        .catch((e: unknown) => e),
      seq,
    );
  }
  expectPinError(await rebuildToolCallLog(journal, RUN, "lean").catch((e: unknown) => e), seq);
  expectPinError(await foldRun(journal, RUN).catch((e: unknown) => e), seq);
  expect(await count(), "entries after the refused resumes").toBe(before);
}

describe("a mode pin holding neither full nor lean is refused before any append", () => {
  it("on a memory store (a foreign store that hands back a pin it altered)", async () => {
    const inner = memoryStore({ json: true });
    let alter = false;
    const store: EventStore = {
      ...inner,
      async read(runId, options) {
        const entries = await inner.read(runId, options);
        if (!alter) return entries;
        return entries.map((e) =>
          e.type === "decision.recorded" && e.data.decisionId === PIN
            ? ({ ...e, data: { ...e.data, choice: { mode: "medium" } } } as JournalEntry)
            : e,
        );
      },
    };
    const journal = createJournal({ store });
    await recordStopped(journal);
    const pinSeq = (await inner.read(RUN)).find((e) => e.type === "decision.recorded")?.seq as number;
    alter = true;
    await expectRefusedEverywhere(journal, pinSeq, async () => (await inner.read(RUN)).length);
  });

  it("on SQLite (the pin row altered with plain SQL), from a freshly opened file", async () => {
    const path = tmp.file("pin.db");
    const first = openSqliteJournal(path);
    await recordStopped(first);
    await first.close();
    const db = new Database(path);
    const sql = (q: string) => db.prepare(q);
    try {
      const seq = sql("SELECT seq FROM loom_journal WHERE run_id = ? AND type = 'decision.recorded'").pluck().get(RUN);
      const changed = sql("UPDATE loom_entries SET data = replace(data, '\"lean\"', '\"LEAN\"') WHERE seq = ?").run(
        seq,
      );
      expect(changed.changes).toBe(1);
      const journal = openSqliteJournal(path);
      try {
        await expectRefusedEverywhere(
          journal,
          seq as number,
          async () => sql("SELECT count(*) FROM loom_entries").pluck().get() as number,
        );
      } finally {
        await journal.close();
      }
    } finally {
      db.close();
    }
  });

  it("refuses to append a pin that holds no mode", async () => {
    const journal = createJournal({ store: memoryStore() });
    await recordStopped(journal);
    const version = (await journal.store.read(RUN)).length;
    const bad = { decisionId: "other#toolCallLog", source: "agent-tool-call-log", choice: { mode: 7 } };
    const thrown = await journal.store
      .append(RUN, [{ type: "decision.recorded", data: bad }], { expectedVersion: version })
      .catch((e: unknown) => e);
    expect(isJournalFormatError(thrown)).toBe(true);
    expect((await journal.store.read(RUN)).length).toBe(version);
  });
});

import { describe, expect, it } from "vitest";
import { type JournalEntry, type NewEntry, SCHEMA_VERSION } from "../../src/events/types.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { frameStarted, runStarted } from "../events/entries.ts";

const meta = { v: SCHEMA_VERSION, at: "2026-12-03T10:00:00.000Z" };
const stored = (entries: NewEntry[]): JournalEntry[] =>
  entries.map((e, i) => ({ runId: "r", seq: i + 1, ...e, meta }) as JournalEntry);

const FRAME = "demo#turn:0:model";
const failed = (attempt: number, retryAt: number | null): NewEntry => ({
  type: "attempt.failed",
  data: { frameId: FRAME, attempt, error: { name: "E", message: `try ${attempt}`, retryable: true }, retryAt },
});

describe("the fold of failed attempts (RunState.attempts)", () => {
  it("given a failed attempt, keeps its number, error and retryAt, waiting until the next attempt starts", () => {
    const given = [runStarted(), frameStarted(FRAME, "model"), failed(1, 5_000)];
    const waiting = foldEntries(stored(given)).attempts[FRAME];
    expect(waiting).toEqual({
      attempt: 1,
      spent: 0,
      error: { name: "E", message: "try 1", retryable: true },
      retryAt: 5_000,
      waiting: true,
    });
    const next = foldEntries(stored([...given, frameStarted(FRAME, "model")])).attempts[FRAME];
    expect(next).toMatchObject({ attempt: 1, waiting: false });
  });

  it("counts the attempts a model-error interruption ended as spent, so a resume has the whole budget again", () => {
    const given = [
      runStarted(),
      frameStarted(FRAME, "model"),
      failed(1, 1),
      frameStarted(FRAME, "model"),
      failed(2, null),
      { type: "run.interrupted", data: { reason: "model-error", detail: null } } as NewEntry,
    ];
    expect(foldEntries(stored(given)).attempts[FRAME]).toMatchObject({ attempt: 2, spent: 2 });
    const again = [...given, frameStarted(FRAME, "model"), failed(3, 9)];
    expect(foldEntries(stored(again)).attempts[FRAME]).toMatchObject({ attempt: 3, spent: 2, retryAt: 9 });
  });

  it("an abort during a back-off spends nothing: the count and the wait go on", () => {
    const given = [
      runStarted(),
      frameStarted(FRAME, "model"),
      failed(1, 7_000),
      { type: "run.interrupted", data: { reason: "aborted", detail: null } } as NewEntry,
    ];
    expect(foldEntries(stored(given)).attempts[FRAME]).toMatchObject({
      attempt: 1,
      spent: 0,
      retryAt: 7_000,
      waiting: true,
    });
  });
});

import { describe, expect, it } from "vitest";
import { JournalFormatError } from "../../src/core/errors.ts";
import { type JournalEntry, type NewEntry, SCHEMA_VERSION } from "../../src/events/types.ts";
import { checkNewEntries, validateEntries } from "../../src/events/validate.ts";
import { decision, frameCompleted, frameFailed, frameStarted, runCompleted, runStarted } from "./entries.ts";

const meta = { v: SCHEMA_VERSION, at: "2024-01-01T00:00:00.000Z" };
const stored = (entries: NewEntry[], seqs = entries.map((_, i) => i + 1)): JournalEntry[] =>
  entries.map((e, i) => ({ runId: "r", seq: seqs[i]!, ...e, meta }) as JournalEntry);

const every: NewEntry[] = [
  runStarted(),
  decision("demo#toolCallLog", { mode: "lean" }),
  frameStarted("demo#turn:0:tool:0"),
  frameCompleted("demo#turn:0:tool:0", { ok: 1 }),
  frameStarted("demo#turn:0:tool:1"),
  {
    type: "attempt.failed",
    data: {
      frameId: "demo#turn:0:tool:1",
      attempt: 1,
      error: { name: "AI_APICallError", message: "slow down", status: 429, retryable: true, retryAfterMs: 1000 },
      retryAt: 1_764_752_000_000,
    },
  },
  frameStarted("demo#turn:0:tool:1"),
  {
    type: "attempt.failed",
    data: {
      frameId: "demo#turn:0:tool:1",
      attempt: 2,
      error: { name: "E", message: "m", retryable: false },
      retryAt: null,
    },
  },
  frameFailed("demo#turn:0:tool:1"),
  frameStarted("demo#turn:0:tool:2"),
  { type: "frame.completed", data: { frameId: "demo#turn:0:tool:2" } } as NewEntry, // a tool that returned undefined
  {
    type: "call.settled",
    data: { stepId: "demo#turn:0:tool:3", status: "error", reason: "unknown-tool", result: "no" },
  },
  { type: "run.interrupted", data: { reason: "aborted", detail: null } },
  { type: "run.failed", data: { error: { name: "Error", code: "x", message: "boom" } } },
  runCompleted(),
];

/** The error validateEntries raises for `entries`, or undefined. */
function failure(entries: unknown[], from?: number): JournalFormatError | undefined {
  try {
    validateEntries("r", entries, from === undefined ? undefined : { from });
  } catch (e) {
    if (e instanceof JournalFormatError) return e;
    throw e;
  }
  return undefined;
}

const patch = (e: JournalEntry, change: Record<string, unknown>) => ({ ...e, ...change }) as JournalEntry;

describe("validateEntries", () => {
  it("accepts every entry type of the schema", () => {
    expect(failure(stored(every))).toBeUndefined();
  });

  it.each([
    ["a type it does not know", { type: "run.paused" }, "type"],
    ["no type", { type: undefined }, "type"],
    ["a future schema version", { meta: { v: SCHEMA_VERSION + 1, at: meta.at } }, "meta.v"],
    ["no schema version", { meta: { at: meta.at } }, "meta.v"],
    ["no time", { meta: { v: 1 } }, "meta.at"],
    ["another run's entry", { runId: "other" }, "runId"],
    ["data that is not an object", { data: "text" }, "data"],
    ["a non-integer seq", { seq: 2.5 }, "seq"],
  ])("refuses %s", (_, change, field) => {
    const entries = stored([runStarted(), decision("d", 1), decision("e", 2)]);
    entries[1] = patch(entries[1]!, change);
    expect(failure(entries)).toMatchObject({ runId: "r", field, seq: "seq" in change ? undefined : 2 });
  });

  it.each([
    ["run.started without tools", { type: "run.started", data: { loopId: "l", input: "x" } }, "data.tools"],
    [
      "a tool name that is not a string",
      { type: "run.started", data: { loopId: "l", input: "x", tools: [1] } },
      "data.tools[0]",
    ],
    ["run input of the wrong kind", { type: "run.started", data: { loopId: "l", input: 3, tools: [] } }, "data.input"],
    [
      "a decision without a choice",
      { type: "decision.recorded", data: { decisionId: "d", source: "s" } },
      "data.choice",
    ],
    [
      "a frame start without its input digest",
      { type: "frame.started", data: { frameId: "f", effect: "model" } },
      "data.inputDigest",
    ],
    [
      "a failed frame with an output",
      { type: "frame.completed", data: { frameId: "f", failed: true, output: 1 } },
      "data.output",
    ],
    ["failed: false", { type: "frame.completed", data: { frameId: "f", failed: false } }, "data.failed"],
    [
      "a claim-check mark beside an output that is no envelope",
      { type: "frame.completed", data: { frameId: "f", claimChecked: true, output: { secret: 1 } } },
      "data.claimChecked",
    ],
    [
      "a claim-check mark that is not true",
      {
        type: "frame.completed",
        data: { frameId: "f", claimChecked: 1, output: { __loomClaimCheck: 1, ref: "r", size: 1, digest: "d" } },
      },
      "data.claimChecked",
    ],
    [
      "a mode pin that holds no mode",
      { type: "decision.recorded", data: { decisionId: "l#toolCallLog", source: "agent-tool-call-log", choice: {} } },
      "data.choice.mode",
    ],
    [
      "a settled call with another status",
      { type: "call.settled", data: { stepId: "s", status: "meh", reason: "x" } },
      "data.status",
    ],
    [
      "a failed attempt whose retryability is not decided",
      { type: "attempt.failed", data: { frameId: "f", attempt: 1, error: { name: "E", message: "m" }, retryAt: null } },
      "data.error.retryable",
    ],
    [
      "a failed attempt numbered 0",
      {
        type: "attempt.failed",
        data: { frameId: "f", attempt: 0, error: { name: "E", message: "m", retryable: true }, retryAt: null },
      },
      "data.attempt",
    ],
    [
      "a failed attempt with a retryAt that is not a time",
      {
        type: "attempt.failed",
        data: { frameId: "f", attempt: 1, error: { name: "E", message: "m", retryable: true }, retryAt: "soon" },
      },
      "data.retryAt",
    ],
    ["an interruption without a reason", { type: "run.interrupted", data: { detail: 1 } }, "data.reason"],
    ["a failure without a message", { type: "run.failed", data: { error: { name: "E" } } }, "data.error.message"],
    ["a completed run without output", { type: "run.completed", data: {} }, "data.output"],
    [
      "a marker without the digest of a frame it names",
      { type: "frames.archived", data: { frameIds: ["f"], archiveRef: "a", digests: {} } },
      'data.digests["f"]',
    ],
  ])("refuses %s, naming the field", (_, entry, field) => {
    const entries = stored([runStarted(), frameStarted("f", "model"), entry as NewEntry]);
    expect(failure(entries)).toMatchObject({ runId: "r", seq: 3, field });
  });

  it("refuses a seq that does not increase", () => {
    expect(failure(stored([runStarted(), decision("a", 1), decision("b", 2)], [1, 3, 3]))).toMatchObject({
      seq: 3,
      field: "seq",
    });
  });

  it("refuses a completion without a start, a second completion, and a start after completion", () => {
    expect(failure(stored([runStarted(), frameCompleted("f", 1)]))?.message).toMatch(
      /frame f completed but never started/,
    );
    const twice = [runStarted(), frameStarted("f"), frameCompleted("f", 1), frameCompleted("f", 2)];
    expect(failure(stored(twice))).toMatchObject({ seq: 4, field: "data.frameId" });
    const again = [runStarted(), frameStarted("f"), frameCompleted("f", 1), frameStarted("f")];
    expect(failure(stored(again))?.message).toMatch(/started again after it completed/);
    // A retried frame starts twice before it completes: that is fine.
    expect(
      failure(stored([runStarted(), frameStarted("f"), frameStarted("f"), frameCompleted("f", 1)])),
    ).toBeUndefined();
  });

  it("refuses a failed attempt recorded after its frame completed", () => {
    const attempt = {
      type: "attempt.failed",
      data: { frameId: "f", attempt: 1, error: { name: "E", message: "m", retryable: true }, retryAt: null },
    } as NewEntry;
    const late = [runStarted(), frameStarted("f"), frameCompleted("f", 1), attempt];
    expect(failure(stored(late))?.message).toMatch(/frame f has a failed attempt after it completed/);
  });

  it("does not judge frame life when the read starts after seq 1", () => {
    expect(failure(stored([frameCompleted("f", 1), decision("d", 1)], [5, 6]), 5)).toBeUndefined();
  });

  describe("seq gaps", () => {
    const marker = (seqs: number[] | undefined): NewEntry => ({
      type: "frames.archived",
      data: {
        frameIds: ["l#turn:0:tool:0"],
        archiveRef: "ref",
        digests: { "l#turn:0:tool:0": { digest: null, bytes: 0 } },
        ...(seqs === undefined ? {} : { seqs }),
      },
    });

    it("accepts a gap that a later marker lists as removed", () => {
      expect(failure(stored([runStarted(), decision("d", 1), marker([2, 3])], [1, 4, 5]))).toBeUndefined();
    });

    it("refuses a gap no marker accounts for, naming the first missing seq", () => {
      const e = failure(stored([runStarted(), decision("d", 1), marker([2])], [1, 4, 5]));
      expect(e).toMatchObject({ runId: "r", seq: 3, field: "seq" });
      expect(e?.message).toMatch(
        /entries 2–3 are missing \(the next entry is 4\) and no frames.archived marker removed seq 3/,
      );
      expect(failure(stored([runStarted(), decision("d", 1)], [1, 3]))).toMatchObject({ seq: 2 });
    });

    it("refuses a gap at the start of a read from a seq", () => {
      expect(failure(stored([decision("d", 1)], [7]), 5)).toMatchObject({ seq: 5 });
      expect(failure(stored([decision("d", 1), marker([5, 6])], [7, 8]), 5)).toBeUndefined();
    });

    it("refuses a marker that claims to have removed a later entry", () => {
      expect(failure(stored([runStarted(), marker([3])], [1, 2]))).toMatchObject({ seq: 2, field: "data.seqs[0]" });
    });

    it("excuses gaps before a marker that does not list its seqs (written without the field)", () => {
      expect(failure(stored([runStarted(), marker(undefined), decision("d", 1)], [1, 4, 5]))).toBeUndefined();
      expect(failure(stored([runStarted(), marker(undefined), decision("d", 1)], [1, 4, 7]))).toMatchObject({ seq: 5 });
    });
  });
});

describe("checkNewEntries", () => {
  it("names the seq a bad entry would have taken", () => {
    const bad = { type: "frame.started", data: { frameId: "f" } } as unknown as NewEntry;
    expect(() => checkNewEntries("r", [runStarted(), bad], 4)).toThrow(
      expect.objectContaining({ runId: "r", seq: 6, field: "data.effect" }),
    );
  });
});

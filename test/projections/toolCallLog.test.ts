import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { digestOf } from "../../src/core/digest.ts";
import { isJournalFormatError } from "../../src/core/errors.ts";
import { toolStepId } from "../../src/events/ids.ts";
import type { SettledReason } from "../../src/events/types.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import {
  ArchivedOutputError,
  isArchivedOutputError,
  isFullToolCallLog,
  isLeanAgentStep,
  projectToolCallLog,
  recordedModePin,
  toLeanStep,
} from "../../src/projections/toolCallLog.ts";
import type { AgentStep, LeanAgentStep } from "../../src/projections/types.ts";
import { buildRun, type CallPlan, compactEntries, type RunPlan, type TurnPlan, withSeqs } from "./runBuilder.ts";

const LOOP = "support";

const fold = (plan: RunPlan) => {
  const built = buildRun(plan);
  return { ...built, journal: withSeqs(plan.runId, built.entries) };
};

class Money {
  constructor(readonly cents: number) {}
  toJSON() {
    return { amount: this.cents / 100, currency: "EUR" };
  }
}

/** Live tool outputs, including values whose recorded (JSON) form differs from the live one. */
const liveOutput = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.date({ noInvalidDate: true }),
  fc.date({ noInvalidDate: true }).map((d) => ({ at: d, tags: new Map([["k", 1]]) })),
  fc.integer({ min: 0, max: 1e6 }).map((c) => new Money(c)),
  fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
  fc.constant(undefined),
  fc.constant(new Map([["a", 1]])),
);

const REFUSALS: SettledReason[] = [
  "unknown-tool",
  "input-too-large",
  "invalid-input",
  "approval-declined",
  "search-tools",
  "skill-activation",
];

const call = (pending: boolean): fc.Arbitrary<CallPlan> => {
  const base = { name: fc.constantFrom("search", "fetch", "nope"), input: fc.jsonValue({ maxDepth: 2 }) };
  const ended = [
    fc.record({ kind: fc.constant("ok" as const), ...base, output: liveOutput }),
    fc.record({
      kind: fc.constant("failed" as const),
      ...base,
      failure: fc.record({ error: fc.string(), name: fc.constant("Error") }),
    }),
    fc.record({
      kind: fc.constant("settled" as const),
      ...base,
      status: fc.constantFrom("ok" as const, "error" as const),
      reason: fc.constantFrom(...REFUSALS),
      result: fc.jsonValue({ maxDepth: 2 }),
    }),
  ];
  return pending
    ? fc.oneof(...ended, fc.record({ kind: fc.constant("pending" as const), ...base, started: fc.boolean() }))
    : fc.oneof(...ended);
};

const turn = (pending: boolean): fc.Arbitrary<TurnPlan> =>
  fc.array(call(pending), { maxLength: 4 }).chain((calls) =>
    fc
      .shuffledSubarray(
        calls.map((_, j) => j),
        { minLength: calls.length },
      )
      .map((endOrder) => ({ calls, endOrder })),
  );

/** A run: finished (no pending call) and completed, or stopped anywhere with calls in flight. */
const runPlan: fc.Arbitrary<RunPlan> = fc
  .oneof(
    fc.array(turn(false), { minLength: 1, maxLength: 6 }).map((turns) => ({ turns, complete: true })),
    fc.array(turn(true), { minLength: 1, maxLength: 6 }).map((turns) => ({ turns, complete: false })),
  )
  .chain((p) =>
    fc
      .constantFrom(undefined, "full" as const, "lean" as const)
      .map((pin) => ({ loopId: LOOP, runId: "run-p", ...p, ...(pin ? { pin } : {}) })),
  );

describe("projectToolCallLog (properties over generated runs)", () => {
  it("every lean entry equals its full entry turned lean: same digest and bytes, its step id and status", () => {
    fc.assert(
      fc.property(runPlan, (plan) => {
        const { journal, fed } = fold(plan);
        const state = foldEntries(journal);
        const full = projectToolCallLog(state, "full");
        const lean = projectToolCallLog(state, "lean");
        expect(lean).toHaveLength(full.length);
        expect(full).toHaveLength(fed.size);
        lean.forEach((entry, k) => {
          const f = full[k] as AgentStep;
          expect(entry).toEqual(toLeanStep(f, entry.stepId, entry.status));
          expect(entry.stepId).toBe(toolStepId(LOOP, f.iteration, Number(entry.stepId.split(":").pop())));
          // D2: the live value the model was fed digests the same as the recorded one.
          const live = fed.get(entry.stepId);
          expect(entry.status).toBe(live?.status);
          expect({ digest: entry.digest, bytes: entry.bytes }).toEqual(digestOf(live?.output));
        });
      }),
      { numRuns: 300 },
    );
  });

  it("orders the log by iteration, then by call index, whatever order the calls ended in", () => {
    fc.assert(
      fc.property(runPlan, (plan) => {
        const lean = projectToolCallLog(foldEntries(fold(plan).journal), "lean");
        const keys = lean.map((e) => e.stepId.split("#turn:")[1]?.split(":tool:").map(Number) as [number, number]);
        const sorted = [...keys].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
        expect(keys).toEqual(sorted);
      }),
    );
  });

  it("rebuilds from any prefix of the journal: exactly the calls that had ended by then, in both shapes", () => {
    fc.assert(
      fc.property(runPlan, (plan) => {
        const { journal, ends } = fold(plan);
        const full = projectToolCallLog(foldEntries(journal), "full");
        const lean = projectToolCallLog(foldEntries(journal), "lean");
        for (let k = 0; k <= journal.length; k++) {
          const prefix = foldEntries(journal.slice(0, k));
          const endedBy = (e: LeanAgentStep) => (ends.get(e.stepId) ?? Number.POSITIVE_INFINITY) <= k;
          const keep = lean.map(endedBy);
          expect(projectToolCallLog(prefix, "lean")).toEqual(lean.filter((_, i) => keep[i]));
          expect(projectToolCallLog(prefix, "full")).toEqual(full.filter((_, i) => keep[i]));
        }
      }),
      { numRuns: 100 },
    );
  });

  it("the lean log of a compacted journal (tool frames archived) equals the uncompacted one, with no archive read", () => {
    fc.assert(
      fc.property(runPlan, fc.nat(6), (plan, before) => {
        const { journal } = fold(plan);
        const lean = projectToolCallLog(foldEntries(journal), "lean");
        const { hot, archived } = compactEntries(journal, before);
        const compacted = foldEntries(hot);
        expect(projectToolCallLog(compacted, "lean")).toEqual(lean);
        // The full shape needs the archived outputs: it says so, and works once they are put back.
        const archivedOk = [...archived.keys()].some((id) => compacted.frames[id]?.status === "completed");
        if (archivedOk) expect(() => projectToolCallLog(compacted, "full")).toThrow(ArchivedOutputError);
        for (const [id, output] of archived) {
          const frame = compacted.frames[id];
          if (frame?.status === "completed") frame.output = output;
        }
        expect(projectToolCallLog(compacted, "full")).toEqual(projectToolCallLog(foldEntries(journal), "full"));
      }),
      { numRuns: 150 },
    );
  });
});

describe("projectToolCallLog (hand-built runs)", () => {
  const plan: RunPlan = {
    loopId: LOOP,
    runId: "run-1",
    turns: [
      {
        calls: [
          { kind: "ok", name: "search", input: { q: "loom" }, output: { hits: [1, 2], when: new Date(0) } },
          { kind: "failed", name: "fetch", input: { url: "x" }, failure: { error: "boom", name: "TypeError" } },
        ],
      },
      {
        calls: [
          {
            kind: "settled",
            name: "fetch",
            input: { url: "y" },
            status: "error",
            reason: "approval-declined",
            result: { error: "approval-declined", message: "declined" },
          },
          {
            kind: "ok",
            name: "search",
            input: { q: "big" },
            output: { __loomClaimCheck: 1, ref: `sha256:${"a".repeat(64)}`, size: 9000, digest: "a".repeat(64) },
          },
        ],
      },
    ],
    complete: true,
  };
  const state = foldEntries(withSeqs("run-1", buildRun(plan).entries));

  it("writes full entries as exactly { iteration, toolName, toolInput, toolOutput }, the recorded output", () => {
    const full = projectToolCallLog(state, "full");
    expect(full.map((e) => Object.keys(e))).toEqual(
      full.map(() => ["iteration", "toolName", "toolInput", "toolOutput"]),
    );
    expect(full[0]).toEqual({
      iteration: 0,
      toolName: "search",
      toolInput: { q: "loom" },
      toolOutput: { hits: [1, 2], when: "1970-01-01T00:00:00.000Z" },
    });
    expect(JSON.stringify(full[0])).toBe(
      '{"iteration":0,"toolName":"search","toolInput":{"q":"loom"},"toolOutput":{"hits":[1,2],"when":"1970-01-01T00:00:00.000Z"}}',
    );
  });

  it("writes lean entries as exactly { iteration, toolName, toolInput, status, bytes, digest, stepId }", () => {
    const lean = projectToolCallLog(state, "lean");
    expect(lean.map((e) => Object.keys(e))).toEqual(
      lean.map(() => ["iteration", "toolName", "toolInput", "status", "bytes", "digest", "stepId"]),
    );
    expect(lean.map((e) => [e.stepId, e.status])).toEqual([
      ["support#turn:0:tool:0", "ok"],
      ["support#turn:0:tool:1", "error"],
      ["support#turn:1:tool:0", "error"],
      ["support#turn:1:tool:1", "ok"],
    ]);
  });

  it("feeds a failed tool's outcome decision (choice.failed) as its output, status error", () => {
    const [, failed] = projectToolCallLog(state, "full");
    expect(failed?.toolOutput).toEqual({ error: "boom", name: "TypeError" });
    expect(projectToolCallLog(state, "lean")[1]?.digest).toBe(digestOf({ error: "boom", name: "TypeError" }).digest);
  });

  it("takes a settled call's status and result from call.settled", () => {
    const full = projectToolCallLog(state, "full");
    expect(full[2]?.toolOutput).toEqual({ error: "approval-declined", message: "declined" });
    expect(projectToolCallLog(state, "lean")[2]?.status).toBe("error");
  });

  it("keeps a claim-check envelope in the full log and digests the envelope in the lean one", () => {
    const envelope = projectToolCallLog(state, "full")[3]?.toolOutput;
    expect(envelope).toMatchObject({ __loomClaimCheck: 1, size: 9000 });
    expect(projectToolCallLog(state, "lean")[3]?.digest).toBe(digestOf(envelope).digest);
  });

  it("leaves out a call in flight, one awaiting approval, and a failed frame whose outcome is not journaled yet", () => {
    const built = buildRun({
      loopId: LOOP,
      runId: "run-2",
      turns: [
        {
          calls: [
            { kind: "pending", name: "search", input: {}, started: true },
            { kind: "pending", name: "fetch", input: {}, started: false },
            { kind: "ok", name: "search", input: { q: 2 }, output: 2 },
            { kind: "failed", name: "fetch", input: {}, failure: "x" },
          ],
        },
      ],
    });
    const entries = withSeqs("run-2", built.entries).slice(0, -1); // drop the outcome decision
    expect(projectToolCallLog(foldEntries(entries), "lean").map((e) => e.stepId)).toEqual(["support#turn:0:tool:2"]);
  });

  it("never throws for an output with no JSON form: digest null, bytes 0, the live value in the full log", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    let deep: unknown = 1;
    for (let i = 0; i < 600; i++) deep = [deep];
    const odd = [undefined, () => 1, 10n, cyclic, deep, Symbol("s")];
    // A store that keeps live values (no JSON round trip) hands these to the fold as they are.
    const entries = withSeqs(
      "run-3",
      buildRun({
        loopId: LOOP,
        runId: "run-3",
        turns: [{ calls: odd.map((_, j) => ({ kind: "ok" as const, name: "t", input: j, output: null })) }],
      }).entries,
    );
    for (const e of entries) {
      if (e.type === "frame.completed" && e.data.frameId.includes(":tool:")) {
        (e.data as { output: unknown }).output = odd[Number(e.data.frameId.split(":").pop())];
      }
    }
    const s = foldEntries(entries);
    const lean = projectToolCallLog(s, "lean");
    expect(lean.map((e) => [e.digest, e.bytes])).toEqual(odd.map(() => [null, 0]));
    expect(projectToolCallLog(s, "full").map((e) => e.toolOutput)).toEqual(odd);
  });

  it("an unfolded run has an empty log", () => {
    expect(projectToolCallLog(foldEntries([]), "full")).toEqual([]);
    expect(projectToolCallLog(foldEntries([]), "lean")).toEqual([]);
  });

  it("needs an archived model frame read back, even for the lean log (compaction keeps model frames hot)", () => {
    const { hot } = compactEntries(withSeqs("run-1", buildRun(plan).entries), 1, { models: true });
    const compacted = foldEntries(hot);
    let caught: unknown;
    try {
      projectToolCallLog(compacted, "lean");
    } catch (e) {
      caught = e;
    }
    expect(isArchivedOutputError(caught)).toBe(true);
    expect((caught as ArchivedOutputError).code).toBe("archivedOutputNotHydrated");
    expect((caught as Error).message).toMatch(
      /^run run-1: frame support#turn:0:model was moved .* hydrateArchived\(journal, state\)/,
    );
  });

  it("names the run, the frame and the fix when the full log needs an archived output", () => {
    const { hot } = compactEntries(withSeqs("run-1", buildRun(plan).entries), 1);
    expect(() => projectToolCallLog(foldEntries(hot), "full")).toThrow(
      /run run-1: frame support#turn:0:tool:0 was moved to the archive .* rebuildToolCallLog\(journal, runId, mode\)/,
    );
  });
});

describe("isLeanAgentStep, isFullToolCallLog, toLeanStep", () => {
  const full: AgentStep = { iteration: 2, toolName: "search", toolInput: { q: 1 }, toolOutput: { ok: true } };
  const lean = toLeanStep(full, "support#turn:2:tool:0", "ok");

  it("turns a full entry lean with digestOf its output", () => {
    expect(lean).toEqual({
      iteration: 2,
      toolName: "search",
      toolInput: { q: 1 },
      status: "ok",
      ...digestOf({ ok: true }),
      stepId: "support#turn:2:tool:0",
    });
  });

  it("tells the shapes apart, including a full entry whose output looks lean", () => {
    expect(isLeanAgentStep(lean)).toBe(true);
    expect(isLeanAgentStep(full)).toBe(false);
    expect(isLeanAgentStep({ ...full, toolOutput: { stepId: "x", status: "ok", digest: "d" } })).toBe(false);
    expect(isFullToolCallLog([full])).toBe(true);
    expect(isFullToolCallLog([])).toBe(true);
    expect(isFullToolCallLog([lean])).toBe(false);
  });
});

describe("recordedModePin", () => {
  const pinned = (choice: unknown) =>
    foldEntries(
      withSeqs("run-9", [
        { type: "run.started", data: { loopId: LOOP, input: "x", tools: [] } },
        {
          type: "decision.recorded",
          data: { decisionId: `${LOOP}#toolCallLog`, source: "agent-tool-call-log", choice },
        },
      ]),
    );

  it("reads the journaled pin, or undefined when none was recorded", () => {
    expect(recordedModePin(pinned({ mode: "lean" }))).toBe("lean");
    expect(recordedModePin(pinned({ mode: "full" }))).toBe("full");
    expect(
      recordedModePin(
        foldEntries(withSeqs("run-9", [{ type: "run.started", data: { loopId: LOOP, input: "x", tools: [] } }])),
      ),
    ).toBeUndefined();
  });

  it("refuses a pin that is not { mode: full | lean } with JournalFormatError naming the run and the decision", () => {
    let caught: unknown;
    try {
      recordedModePin(pinned({ mode: "medium" }));
    } catch (e) {
      caught = e;
    }
    expect(isJournalFormatError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(/^run run-9 .*support#toolCallLog/);
  });
});

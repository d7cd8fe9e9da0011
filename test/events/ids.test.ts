import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  approvalId,
  childRunId,
  childRunIdSplits,
  decisionStepOf,
  idempotencyKey,
  isIdName,
  isRunBelow,
  modelFrameId,
  outcomeId,
  parseFrameId,
  runsBelowPrefix,
  scheduledRunOf,
  scheduleRunId,
  sessionMessageOf,
  sessionRunId,
  subRunSteps,
  toolStepId,
  turnId,
} from "../../src/events/ids.ts";

// The grammar parseFrameId reads, as the regex it was first written with: the oracle.
const FRAME = /^(.*)#turn:(\d+):(?:model|tool:(\d+))$/;
function byRegex(frameId: string) {
  const m = FRAME.exec(frameId);
  if (!m) return undefined;
  const loopId = m[1] as string;
  const turn = Number(m[2]);
  return m[3] === undefined ? { kind: "model", loopId, turn } : { kind: "tool", loopId, turn, index: Number(m[3]) };
}

describe("parseFrameId", () => {
  it("takes apart the ids Loom makes", () => {
    expect(parseFrameId(modelFrameId("a#turn:1:model", 12))).toEqual({
      kind: "model",
      loopId: "a#turn:1:model",
      turn: 12,
    });
    expect(parseFrameId(toolStepId("loop", 3, 40))).toEqual({ kind: "tool", loopId: "loop", turn: 3, index: 40 });
  });

  it("reads exactly what the frame id grammar's regex reads, for any string", () => {
    const piece = fc.constantFrom("#turn:", ":", "model", "tool:", "0", "7", "12", "x", "\n", "\u2028", "#", "", "٣");
    const id = fc.array(piece, { maxLength: 8 }).map((ps) => ps.join(""));
    fc.assert(
      fc.property(fc.oneof(id, fc.string()), (s) => {
        expect(parseFrameId(s)).toEqual(byRegex(s));
      }),
      { numRuns: 3000 },
    );
    for (const s of [
      "#turn:1:model",
      "x\n#turn:1:model",
      "a#turn::model",
      "a#turn:1:tool:",
      "a#turn:1:tool:2x",
      "a#turn:1:models",
      "a#turn:01:tool:007",
    ])
      expect(parseFrameId(s), s).toEqual(byRegex(s));
  });
});

describe("idempotencyKey", () => {
  const UUID_V8 = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

  it("keeps its value from version to version: a changed form would make a resumed call a new payment", () => {
    // Computed independently (Python's hashlib and uuid, RFC 9562 Appendix B.2's recipe) when the form was chosen.
    expect(idempotencyKey("order-1042", "support#turn:4:tool:0")).toBe("168a4710-a30f-8505-8645-a28c7fcae01c");
  });

  it("gives each run its own key for the same step, and each step of a run its own", () => {
    const step = toolStepId("support", 4, 0);
    const keys = new Set([
      idempotencyKey("order-1042", step),
      idempotencyKey("order-1043", step),
      idempotencyKey("order-1042", toolStepId("support", 4, 1)),
      idempotencyKey("order-1042/support#turn:0:tool:0", step), // a sub-agent's run
    ]);
    expect(keys.size).toBe(4);
  });

  it("is a 36-character UUID whatever the ids hold, and never mistakes where the run id ends", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 600 }), fc.string({ maxLength: 80 }), (runId, stepId) => {
        const key = idempotencyKey(runId, stepId);
        expect(key).toMatch(UUID_V8);
        expect(idempotencyKey(runId, stepId)).toBe(key);
      }),
    );
    // The same characters split differently are other calls.
    expect(idempotencyKey("a/b", "c")).not.toBe(idempotencyKey("a", "b/c"));
    expect(idempotencyKey('a","b', "c")).not.toBe(idempotencyKey("a", 'b","c'));
  });
});

describe("decision ids", () => {
  it("gives back the step an approval or outcome decision answers for, and nothing for other ids", () => {
    const step = toolStepId("support", 2, 1);
    expect(decisionStepOf(approvalId(step), "approval")).toBe(step);
    expect(decisionStepOf(outcomeId(step), "outcome")).toBe(step);
    expect(decisionStepOf(approvalId(step), "outcome")).toBeUndefined();
    expect(decisionStepOf("support#toolCallLog", "approval")).toBeUndefined();
  });

  it("takes only letters, digits and _.:- as a loop id or a tool source's name", () => {
    expect(["support", "a.b:c-d_9"].every(isIdName)).toBe(true);
    expect(["", "my loop", "a/b", "a#b", "a\nb", 7, undefined].some(isIdName)).toBe(false);
  });
});

describe("sub-agents' run ids", () => {
  const planner = toolStepId("planner", 0, 1);
  const researcher = toolStepId("researcher", 1, 2);

  it("splits a run id at each / followed by what reads as a tool call's step id, the last / first", () => {
    const grandchild = childRunId(childRunId("trip/2", planner), researcher);
    // Only the journal tells which parent exists: every split whose tail parses is a candidate.
    expect([...childRunIdSplits(grandchild)]).toEqual([
      { runId: childRunId("trip/2", planner), stepId: researcher },
      { runId: "trip/2", stepId: `${planner}/${researcher}` },
      { runId: "trip", stepId: `2/${planner}/${researcher}` },
    ]);
    expect([...childRunIdSplits(childRunId("trip", planner))]).toEqual([{ runId: "trip", stepId: planner }]);
    expect([...childRunIdSplits("trip/2")]).toEqual([]);
    expect([...childRunIdSplits(`/${planner}`)]).toEqual([]); // no parent before the /
  });

  it("lists the steps from a root run down to a descendant's run, and nothing for another run", () => {
    const grandchild = childRunId(childRunId("trip", planner), researcher);
    expect(subRunSteps("trip", grandchild)).toEqual([planner, researcher]);
    expect(subRunSteps("trip", "trip")).toEqual([]);
    expect(subRunSteps("trip", "trips/x")).toBeUndefined();
    expect(subRunSteps("trip", "trip/not-a-step")).toBeUndefined();
  });
});

describe("runs below a run, and a session's message runs", () => {
  it("lists a run's sub-agents and a session's messages by one prefix, and tells a run below from a sibling", () => {
    const child = childRunId("trip", toolStepId("planner", 0, 0));
    expect(child.startsWith(runsBelowPrefix("trip"))).toBe(true);
    expect(isRunBelow(child, "trip")).toBe(true);
    expect(isRunBelow("trip", "trip")).toBe(false);
    expect(isRunBelow("trip-2/planner#turn:0:tool:0", "trip")).toBe(false);
    expect(sessionRunId("chat-7", 2).startsWith(runsBelowPrefix("chat-7"))).toBe(true);
  });

  it("reads back the message number of a session's run, and nothing from its sub-agents' runs or other ids", () => {
    for (const n of [0, 1, 12]) expect(sessionMessageOf(sessionRunId("chat-7", n), "chat-7")).toBe(n);
    expect(sessionMessageOf(childRunId(sessionRunId("chat-7", 1), toolStepId("a", 0, 0)), "chat-7")).toBeUndefined();
    for (const id of ["chat-7", "chat-7/", "chat-7/01", "chat-7/-1", "chat-70/1", "chat-7/x"])
      expect(sessionMessageOf(id, "chat-7"), id).toBeUndefined();
  });

  it("begins a turn's model and tool ids with its turn id", () => {
    expect(modelFrameId("a", 3).startsWith(`${turnId("a", 3)}:`)).toBe(true);
    expect(toolStepId("a", 3, 1).startsWith(`${turnId("a", 3)}:`)).toBe(true);
  });
});

describe("scheduledRunOf", () => {
  it("reads the schedule and tick of a scheduled run's id, and nothing from other ids", () => {
    const tick = new Date("2026-03-01T09:00:00.000Z");
    expect(scheduledRunOf(scheduleRunId("digest", tick))).toEqual({ scheduleId: "digest", tick });
    expect(scheduledRunOf("support-42")).toBeUndefined();
    expect(scheduledRunOf("@2026-03-01T09:00:00.000Z")).toBeUndefined(); // no schedule id
    expect(scheduledRunOf("digest@2026-03-01T09:00:00Z")).toBeUndefined(); // not the form Loom writes
    expect(scheduledRunOf("digest@2026-02-30T09:00:00.000Z")).toBeUndefined(); // no such day
    expect(scheduledRunOf("my digest@2026-03-01T09:00:00.000Z")).toBeUndefined(); // not an id name
    // A sub-agent's run of a scheduled run is its parent's, not the schedule's.
    expect(scheduledRunOf(`${scheduleRunId("digest", tick)}/digest#turn:0:tool:0`)).toBeUndefined();
  });
});

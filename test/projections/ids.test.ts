import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { modelFrameId, parseFrameId, toolStepId } from "../../src/projections/ids.ts";

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

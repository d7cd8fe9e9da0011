import { describe, expect, it } from "vitest";
import type { NewEntry } from "../../src/events/types.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { runViewOf } from "../../src/read/runView.ts";
import { endText, runEnd } from "../../src/read/timeline.ts";
import { frameStarted, runStarted } from "../events/entries.ts";
import { withSeqs } from "../projections/runBuilder.ts";

/** The faces' view is derived from the fold a resume trusts: what the fold reads, they show. */
describe("runViewOf: the run as the faces show it, from its RunState", () => {
  it("shows the model's error of an interruption journaled before its cause was, as a resume reads it", () => {
    // Entries of 0.2 kept the model's error in `detail` only.
    const entries = withSeqs("r", [
      runStarted(),
      frameStarted("demo#turn:0:model", "model"),
      {
        type: "run.interrupted",
        data: { reason: "model-error", detail: { name: "AI_APICallError", message: "Unauthorized" } },
      } as NewEntry,
    ]);
    const state = foldEntries(entries);
    expect(state.interruption?.cause).toEqual({ name: "AI_APICallError", message: "Unauthorized" });
    const view = runViewOf(state);
    expect(view.interruption?.cause).toEqual(state.interruption?.cause);
    const end = runEnd(view);
    expect(end && endText(end)).toMatch(/^interrupted: model-error: AI_APICallError.*Unauthorized/);
  });

  it("shows no interruption, no pending approval once the run went on, and the run's end once it ended", () => {
    const asked: NewEntry[] = [
      runStarted(),
      frameStarted("demo#turn:0:model", "model"),
      {
        type: "frame.completed",
        data: { frameId: "demo#turn:0:model", output: { toolCalls: [{ id: "a", name: "search", input: {} }] } },
      },
      {
        type: "run.interrupted",
        data: { reason: "approval-pending", detail: { stepIds: ["demo#turn:0:tool:0"] } },
      } as NewEntry,
    ];
    const waiting = runViewOf(foldEntries(withSeqs("r", asked)));
    expect(waiting.pending).toEqual(["demo#turn:0:tool:0"]);
    expect(waiting.turns[0]?.calls[0]?.status).toBe("awaiting-approval");
    const cancelled = runViewOf(
      foldEntries(withSeqs("r", [...asked, { type: "run.cancelled", data: { reason: "operator stop" } }])),
    );
    expect(cancelled).toMatchObject({ status: "cancelled", chart: "cancelled", pending: [], interruption: undefined });
    expect(cancelled.cancelled).toEqual({ reason: "operator stop" });
    expect(cancelled.turns[0]?.calls[0]?.status).toBe("asked");
  });
});

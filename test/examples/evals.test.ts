import { describe, expect, it } from "vitest";
import { evaluate, exitCodeOf, orderAgent } from "../../examples/evals.ts";
import { createJournal, memoryStore } from "../../src/index.ts";

describe("examples/evals.ts", () => {
  it("replays last week's runs against a changed prompt, reads the diff, and fails CI on a regression", async () => {
    const journal = createJournal({ store: memoryStore() });
    for (const runId of ["mon", "tue", "wed"]) await orderAgent().run({ runId, journal, input: "Where is A-17?" });

    // The prompt changed (the diff says so, at turn 0), the calls did not: every call served
    // from the record, none executed, every run passes.
    const reworded = await evaluate(journal, ["mon", "tue", "wed"], orderAgent({ system: "Be brief." }));
    expect(reworded).toEqual(
      ["mon", "tue", "wed"].map((runId) => ({ runId, pass: true, divergedAt: "turn 0: prompt", executed: 0 })),
    );
    expect(exitCodeOf(reworded)).toBe(0);

    // A candidate that refunds without looking the order up: the lookup is dropped, the refund
    // (a side effect) never runs, and CI fails.
    const refunds: string[] = [];
    const hasty = orderAgent({
      refunds,
      script: [{ toolCalls: [{ id: "c1", name: "refund", input: { id: "A-17" } }] }, { content: "Refunded." }],
    });
    const verdicts = await evaluate(journal, ["mon"], hasty);
    expect(verdicts).toEqual([{ runId: "mon", pass: false, divergedAt: "turn 0: tool-calls", executed: 0 }]);
    expect(refunds).toEqual([]);
    expect(exitCodeOf(verdicts)).toBe(1);
  });
});

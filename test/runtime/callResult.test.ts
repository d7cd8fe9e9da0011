/**
 * Every way a call's result is journaled goes through one write path (src/runtime/base/callResult.ts):
 * an approval answered in the run and one recorded from another process journal the same entries.
 */
import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { recordApproval } from "../../src/runtime/control/approvals.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const STEP = "bank#turn:0:tool:0";

function bank() {
  const refund: Tool<{ amount: number }> = {
    description: "refunds",
    requiresApproval: true,
    execute: ({ amount }) => ({ refunded: amount }),
  };
  const model = scriptedModel([
    { toolCalls: [{ id: "r", name: "refund", input: { amount: 90 } }] },
    { content: "told", toolCalls: [] },
  ]);
  return agentLoop$({ id: "bank", model, tools: { refund } });
}

/** The answer's entries: the approval decision and the call's settlement. */
const answerOf = (entries: readonly JournalEntry[]) =>
  entries
    .filter(
      (e) => (e.type === "decision.recorded" && e.data.decisionId === `${STEP}:approval`) || e.type === "call.settled",
    )
    .map((e) => JSON.stringify([e.type, e.data]));

describe("an approval's answer", () => {
  it.each([true, false])(
    "approved %s: journals the same entries answered in the run or by recordApproval",
    async (approved) => {
      const inRun = jsonJournal();
      await bank().run({ runId: "r", journal: inRun, input: "refund", approvals: { [STEP]: approved } });
      const outside = jsonJournal();
      await bank()
        .run({ runId: "r", journal: outside, input: "refund" })
        .catch(() => {});
      await recordApproval(outside, "r", STEP, { approved });
      const out = await bank().run({ runId: "r", journal: outside });
      expect(out.content).toBe("told");
      const answer = answerOf(await readJournal(inRun, "r"));
      expect(answer).toHaveLength(approved ? 1 : 2);
      expect(answerOf(await readJournal(outside, "r"))).toEqual(answer);
    },
  );
});

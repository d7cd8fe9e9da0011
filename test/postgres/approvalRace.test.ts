import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { isApprovalRefusedError, recordApproval, recordApprovals } from "../../src/runtime/control/operations.ts";
import { approvalLoop, REFUND_STEP } from "../runtime/workers/approvalLoop.ts";
import { dropSchema, freshSchema, PG_URL } from "./pg.ts";

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("approvals answered at the same instant on PostgreSQL", () => {
  const schema = freshSchema("approval_race");
  const N = 6;
  let journals: OpenJournal[] = [];

  beforeAll(() => {
    // One journal (one pool) per answer, as separate processes would have.
    journals = Array.from({ length: N }, () => openPostgresJournal(PG_URL as string, { schema }));
  });
  afterAll(async () => {
    for (const j of journals) await j.close();
    await dropSchema(schema);
  });

  it("N answers for one call from N pools record one decision, the others are told it was decided, and the tool runs once", async () => {
    const [journal] = journals as [OpenJournal];
    const first = approvalLoop();
    await first.loop.run({ runId: "race-1", journal, input: "refund o-1" }).catch(() => undefined);
    const answers = await Promise.allSettled(
      journals.map((j, i) =>
        i % 2 === 0
          ? recordApproval(j, "race-1", REFUND_STEP, { approved: true, by: `person-${i}` })
          : recordApprovals(j, "race-1", [{ stepId: REFUND_STEP, approved: true, by: `person-${i}` }]),
      ),
    );
    expect(answers.filter((a) => a.status === "fulfilled")).toHaveLength(1);
    for (const a of answers) {
      if (a.status === "rejected")
        expect(isApprovalRefusedError(a.reason) && a.reason.code, String(a.reason)).toBe("approvalDecided");
    }
    const decisions = (await readJournal(journal, "race-1")).filter(
      (e) => e.type === "decision.recorded" && e.data.decisionId === `${REFUND_STEP}:approval`,
    );
    expect(decisions).toHaveLength(1);
    const { loop, ran } = approvalLoop();
    await loop.run({ runId: "race-1", journal });
    await loop.run({ runId: "race-1", journal });
    expect(ran).toHaveLength(1);
  }, 60_000);
});

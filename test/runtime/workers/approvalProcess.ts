import { openSqliteJournal } from "../../../src/events/journal.ts";
import { listPendingApprovals, recordApproval } from "../../../src/runtime/control/operations.ts";
import { approvalLoop } from "./approvalLoop.ts";

/**
 * One step of the cross-process approval test, in its own process:
 * `list <db>` prints the pending approvals as JSON; `approve <db> <runId> <stepId> <by>` records an
 * approval; `resume <db> <runId>` resumes the run and prints its answer.
 */
const [command, path, runId, stepId, by] = process.argv.slice(2);
const journal = openSqliteJournal(path as string);
try {
  if (command === "list") console.log(JSON.stringify(await listPendingApprovals(journal)));
  else if (command === "approve") {
    const [pending] = await listPendingApprovals(journal, { runId: runId as string });
    const recorded = await recordApproval(journal, runId as string, stepId as string, {
      approved: true,
      by: by as string,
      inputDigest: pending?.inputDigest ?? "",
    });
    console.log(JSON.stringify(recorded));
  } else if (command === "resume") {
    const { loop, ran } = approvalLoop();
    const out = await loop.run({ runId: runId as string, journal });
    console.log(JSON.stringify({ content: out.content, ran }));
  } else throw new Error(`unknown command ${command}`);
} finally {
  await journal.close();
}

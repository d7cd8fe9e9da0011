/**
 * A refund run in its own process: `refundProcess.ts <sqlite file> <runId>`. The refund tool
 * prints `key <idempotencyKey> <stepId>` and hangs: the test SIGKILLs the process there, so the
 * call's outcome is unknown and a resume in another process runs it again.
 */
import { openSqliteJournal } from "../../../src/events/journal.ts";
import { refundLoop } from "../../support/refundKeys.ts";

const [file, runId] = process.argv.slice(2) as [string, string];
const journal = openSqliteJournal(file);
const loop = refundLoop((key, stepId) => {
  console.log(`key ${key} ${stepId}`);
  return new Promise<never>(() => {}); // killed here
});
await loop.run({ runId, journal, input: "Please refund order A-17" });

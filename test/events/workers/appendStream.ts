/**
 * Child process for the SIGKILL test: appends batches of 1–5 entries to one run, forever, and
 * prints the batch number after each append returns. The parent kills it mid-stream.
 *
 *   node --import tsx test/events/workers/appendStream.ts <db> <runId>
 */
import { sqliteStore } from "../../../src/events/sqlite/sqlite.ts";
import type { NewEntry } from "../../../src/events/types.ts";

const [db, runId] = process.argv.slice(2) as [string, string];
const store = sqliteStore(db);
const padding = "x".repeat(2_000);
let version = 0;
for (let batch = 0; ; batch++) {
  const size = (batch % 5) + 1;
  const entries: NewEntry[] = Array.from({ length: size }, (_, index) => ({
    type: "decision.recorded",
    data: { decisionId: `b${batch}.${index}`, source: "sigkill-test", choice: { batch, index, size, padding } },
  }));
  ({ version } = await store.append(runId, entries, { expectedVersion: version }));
  process.stdout.write(`${batch}\n`);
}

/**
 * Child process for the exit test: opens a journal at synchronous=normal, appends past the first
 * checkpoint request (so the checkpoint worker has started and checkpointed), prints a JSON line
 * of its checkpoint stats, and ends without closing the journal: the process must still exit.
 *
 *   node --import tsx test/events/workers/leftOpen.ts <db>
 */
import { setTimeout as sleep } from "node:timers/promises";
import { openSqliteJournal } from "../../../src/events/journal.ts";
import type { SqliteEventStore } from "../../../src/events/sqlite/sqlite.ts";
import { checkpointStatsOf } from "../../../src/events/sqlite/sqliteCheckpoint.ts";
import { sqliteFileOf } from "../../../src/events/sqlite/sqliteFile.ts";
import { decision, runStarted } from "../entries.ts";

const [path] = process.argv.slice(2) as [string];
const journal = openSqliteJournal(path, { synchronous: "normal" });
const text = "z".repeat(8000);
await journal.store.append("r", [runStarted()], { expectedVersion: 0 });
for (let v = 1; v < 300; v++) {
  await journal.store.append("r", [decision(`d${v}`, text)], { expectedVersion: v });
}
const stats = checkpointStatsOf((journal.store as SqliteEventStore)[sqliteFileOf].db);
for (let i = 0; i < 1000 && (stats?.checkpoints ?? 0) === 0 && stats?.failed === undefined; i++) await sleep(10);
process.stdout.write(`${JSON.stringify(stats)}\n`);
// No journal.close(): nothing here keeps the event loop busy, so the process ends now.

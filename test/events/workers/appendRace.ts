/**
 * Child process for the two-writer test: reads the run's version, waits for the go file, then
 * appends `count` entries one at a time with expectedVersion, re-reading after each conflict.
 * Its first append uses the version read before the go signal, so one of two writers must lose.
 * Between appends it pauses up to 2 ms, so the writers interleave. Prints `ready`, then a JSON line `{ appended, conflicts }`.
 *
 *   node --import tsx test/events/workers/appendRace.ts <db> <runId> <name> <count> <goFile>
 */
import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { isConcurrencyError } from "../../../src/core/errors.ts";
import { sqliteStore } from "../../../src/events/sqlite/sqlite.ts";

const [db, runId, name, countText, goFile] = process.argv.slice(2) as [string, string, string, string, string];
const count = Number(countText);
const store = sqliteStore(db);
const versionNow = async () => (await store.listRuns()).find((r) => r.runId === runId)?.version ?? 0;

let version = await versionNow();
process.stdout.write("ready\n");
while (!existsSync(goFile)) await sleep(2);
let appended = 0;
let conflicts = 0;
while (appended < count) {
  try {
    const entry = {
      type: "decision.recorded" as const,
      data: { decisionId: `${name}.${appended}`, source: name, choice: appended },
    };
    ({ version } = await store.append(runId, [entry], { expectedVersion: version }));
    appended++;
    await sleep(Math.random() * 2); // lets the other writer in between, so the two interleave
  } catch (e) {
    if (!isConcurrencyError(e)) throw e;
    conflicts++;
    version = e.actual;
  }
}
process.stdout.write(`${JSON.stringify({ appended, conflicts })}\n`);
await store.close();

/**
 * A process of test/runtime/eventProcess.test.ts: `start <db> <runId>` starts a run of the `payer`
 * loop (test/runtime/workers/waitLoops.ts) on a SQLite journal, which waits for a payment event;
 * prints `token <token>` and `waiting`, then stays alive, the journal open, until it is killed.
 */
import { openSqliteJournal } from "../../../src/events/journal.ts";
import { isAgentInterruptedError } from "../../../src/runtime/base/errors.ts";
import { loops, tokens } from "./waitLoops.ts";

const [, path, runId] = process.argv.slice(2) as [string, string, string];
const journal = openSqliteJournal(path);
const e = await loops[0]?.run({ runId, journal, input: "pay" }).catch((x: unknown) => x);
for (const token of tokens) console.log(`token ${token}`);
console.log(isAgentInterruptedError(e) ? e.run.reason : `unexpected ${String(e)}`);
setInterval(() => {}, 1000); // the process lives on, holding the journal, until killed

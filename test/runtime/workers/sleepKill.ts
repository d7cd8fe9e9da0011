/**
 * A process of test/runtime/sleepKill.test.ts. The loop's first turn calls two tools at once:
 * `remind` sleeps 3 days, `hold` runs until the process is killed (in `start` mode; later it
 * returns at once), so the run is still in its turn, its wait journaled and not yet stopped for.
 * - `start <db> <nowMs>`: starts the run, prints `wait-journaled` once the wait's decision is in
 *   the journal, and keeps holding until killed;
 * - `waits <db>`: prints listWaits as JSON;
 * - `wake <db> <nowMs>`: runs wakeDueRuns once with that clock and prints what it did as JSON.
 */
import { waitId } from "../../../src/events/ids.ts";
import { openSqliteJournal, readJournal } from "../../../src/events/journal.ts";
import { scriptedModel } from "../../../src/models/scripted.ts";
import type { Tool } from "../../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../../src/runtime/run/agentLoop.ts";
import { listWaits, wakeDueRuns } from "../../../src/runtime/run/waits.ts";

const [mode, path, nowText] = process.argv.slice(2) as [string, string, string];
const now = () => Number(nowText);
const remind: Tool = {
  description: "reminds later",
  execute: (_input, ctx) => {
    console.log("tool-executed remind");
    return ctx.sleep(3 * 86_400_000, { result: { reminded: true } });
  },
};
const hold: Tool = {
  description: "holds the turn open",
  execute: () => {
    console.log("tool-executed hold");
    return mode === "start" ? new Promise(() => {}) : { held: true };
  },
};
const model = scriptedModel([
  {
    toolCalls: [
      { id: "r", name: "remind", input: {} },
      { id: "h", name: "hold", input: {} },
    ],
  },
  { content: "reminded", toolCalls: [] },
]);
const loop = agentLoop$({ id: "rem", model, tools: { remind, hold } });
const journal = openSqliteJournal(path);

if (mode === "start") {
  // A short lease: once the process is killed, nobody holds the run a second later (it is stalled).
  void loop.run({ runId: "r", journal, input: "remind me in 3 days", now, ownership: { leaseMs: 1_000 } });
  const decided = waitId("rem#turn:0:tool:0");
  const poll = setInterval(async () => {
    const entries = await readJournal(journal, "r");
    if (entries.some((e) => e.type === "decision.recorded" && e.data.decisionId === decided)) {
      clearInterval(poll);
      console.log("wait-journaled");
    }
  }, 10);
} else if (mode === "waits") {
  console.log(JSON.stringify(await listWaits(journal)));
  await journal.close();
} else {
  const woken = await wakeDueRuns(journal, { loops: [loop], now });
  console.log(JSON.stringify({ woken, modelCalls: model.calls }));
  await journal.close();
}

/**
 * A process of test/runtime/sleepProcess.test.ts: `start <db> <nowMs>` starts a run whose tool
 * sleeps 3 days, then keeps an embedded scheduler (wakeDueRuns every 20 ms) going until killed;
 * `wake <db> <nowMs>` runs wakeDueRuns once with that clock and prints what it did as JSON.
 */
import { openSqliteJournal } from "../../../src/events/journal.ts";
import { scriptedModel } from "../../../src/models/scripted.ts";
import type { Tool } from "../../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../../src/runtime/run/agentLoop.ts";
import { wakeDueRuns } from "../../../src/runtime/run/waits.ts";

const [mode, path, nowText] = process.argv.slice(2) as [string, string, string];
const now = () => Number(nowText);
const remind: Tool<{ days: number }> = {
  description: "reminds later",
  execute: ({ days }, ctx) => {
    console.log("tool-executed");
    return ctx.sleep(days * 86_400_000, { result: { reminded: true } });
  },
};
const model = scriptedModel([
  { toolCalls: [{ id: "r", name: "remind", input: { days: 3 } }] },
  { content: "reminded", toolCalls: [] },
]);
const loop = agentLoop$({ id: "rem", model, tools: { remind } });
const journal = openSqliteJournal(path);

if (mode === "start") {
  const e = await loop.run({ runId: "r", journal, input: "remind me in 3 days", now }).catch((x) => x);
  console.log(isAgentInterruptedError(e) ? `waiting ${e.run.waits[0]?.until}` : `unexpected ${String(e)}`);
  setInterval(() => {
    void wakeDueRuns(journal, { loops: [loop], now }).then((woken) => console.log(`tick ${JSON.stringify(woken)}`));
  }, 20);
} else {
  const woken = await wakeDueRuns(journal, { loops: [loop], now });
  console.log(JSON.stringify({ woken, modelCalls: model.calls }));
  await journal.close();
}

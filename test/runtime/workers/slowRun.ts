/**
 * A run in its own process, for followRun: `slowRun.ts <sqlite file> <runId> <turns> <toolDelayMs>`
 * runs `turns` turns of one slow tool call each, printing `started` once the run's first entry is
 * durable and `done` at the end.
 */
import { openSqliteJournal } from "../../../src/events/journal.ts";
import { scriptedModel } from "../../../src/models/scripted.ts";
import { agentLoop$ } from "../../../src/runtime/run/agentLoop.ts";

const [file, runId, turnsArg, delayArg] = process.argv.slice(2) as [string, string, string, string];
const turns = Number(turnsArg);
const delayMs = Number(delayArg);
const journal = openSqliteJournal(file);
const loop = agentLoop$({
  id: "slow",
  model: scriptedModel([
    ...Array.from({ length: turns }, (_, i) => ({
      content: `turn ${i}`,
      toolCalls: [{ id: `c${i}`, name: "wait", input: { i } }],
    })),
    { content: "finished", toolCalls: [] },
  ]),
  tools: {
    wait: {
      description: "waits",
      execute: async (input) => {
        await new Promise((r) => setTimeout(r, delayMs));
        return { waited: (input as { i: number }).i };
      },
    },
  },
});
let told = false;
await loop.run({
  runId,
  input: "go",
  journal,
  onEvent: () => {
    if (!told) console.log("started");
    told = true;
  },
});
console.log("done");
await journal.close();

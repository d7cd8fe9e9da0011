import { isRunCancelledError } from "../../../src/core/errors.ts";
import { openSqliteJournal } from "../../../src/events/journal.ts";
import { scriptedModel } from "../../../src/models/scripted.ts";
import { agentLoop$ } from "../../../src/runtime/run/agentLoop.ts";

/**
 * The run of the cross-process cancel test: its tool waits until its signal aborts. Prints
 * `started` when the tool runs, then how the run ended and why the tool's signal aborted.
 */
const [path, runId] = process.argv.slice(2) as [string, string];
const journal = openSqliteJournal(path);
let reason: unknown;
const loop = agentLoop$({
  id: "far",
  model: scriptedModel([{ toolCalls: [{ id: "c", name: "wait", input: {} }] }, { content: "no", toolCalls: [] }]),
  tools: {
    wait: {
      description: "waits until aborted",
      execute: (_input, { signal }) =>
        new Promise((_, reject) => {
          console.log("started");
          signal.addEventListener("abort", () => {
            reason = signal.reason;
            reject(signal.reason);
          });
        }),
    },
  },
});
// The tool holds no timer or socket and the lease renewal is unref'd: keep the process alive meanwhile.
const keepAlive = setInterval(() => {}, 1_000);
const outcome = await loop.run({ runId, journal, input: "go", ownership: { leaseMs: 600 } }).catch((e: unknown) => e);
console.log(
  JSON.stringify({
    cancelled: isRunCancelledError(outcome),
    reason: isRunCancelledError(outcome) ? outcome.reason : String(outcome),
    toolAbortedByCancel: isRunCancelledError(reason),
  }),
);
clearInterval(keepAlive);
await journal.close();

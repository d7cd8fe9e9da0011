/**
 * The back-off resume fixture, run as its own process by test/runtime/backoffProcess.test.ts.
 *
 *   node --import tsx test/runtime/workers/backoffProcess.ts first <db> abort|wait
 *   node --import tsx test/runtime/workers/backoffProcess.ts resume <db>
 *
 * `first` runs run r on the SQLite file with a model that is rate limited (429, `Retry-After: 3`).
 * Once the failed attempt is journaled (its `model-retrying` event) it prints `backing-off <retryAt>`;
 * with `abort` it then aborts the run and prints `stopped <reason>`, with `wait` it waits for its
 * parent's SIGKILL. `resume` resumes r in this fresh process with a model that fails once more
 * (503) and then answers, and prints one JSON line: what it saw and when its model was first called.
 */
import { MockLanguageModelV3 } from "ai/test";
import { fromAiSdk } from "../../../src/ai-sdk.ts";
import { agentLoop$, isAgentInterruptedError, openSqliteJournal } from "../../../src/index.ts";
import { apiCallError, textResult } from "../../support/aiSdkResults.ts";

const [phase, path, how] = process.argv.slice(2) as [string, string, string | undefined];

const journal = openSqliteJournal(path);

if (phase === "first") {
  // Watched runs (onEvent) call the model's stream: both ways are rate limited.
  const limited = async (): Promise<never> => {
    throw apiCallError(429, { "retry-after": "3" });
  };
  const model = new MockLanguageModelV3({ doGenerate: limited, doStream: limited });
  const controller = new AbortController();
  const loop = agentLoop$({ id: "m", model: fromAiSdk(model) });
  const run = loop.run({
    runId: "r",
    journal,
    input: "hi",
    signal: controller.signal,
    onEvent(event) {
      if (event.type !== "model-retrying") return;
      process.stdout.write(`backing-off ${event.retryAt}\n`);
      if (how === "abort") controller.abort();
    },
  });
  try {
    await run;
    process.stdout.write("completed\n");
  } catch (e) {
    process.stdout.write(`stopped ${isAgentInterruptedError(e) ? e.run.reason : String(e)}\n`);
  }
  await journal.close();
} else {
  let calls = 0;
  let firstCallAt: number | undefined;
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      firstCallAt ??= Date.now();
      if (calls++ === 0) throw apiCallError(503);
      return textResult("done");
    },
  });
  const loop = agentLoop$({ id: "m", model: fromAiSdk(model), retry: { model: { initialDelayMs: 10, jitter: 0 } } });
  const startedAt = Date.now();
  const out = await loop.run({ runId: "r", journal });
  process.stdout.write(`${JSON.stringify({ content: out.content, calls, startedAt, firstCallAt })}\n`);
  await journal.close();
}

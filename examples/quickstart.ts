import { agentLoop$, isAgentInterruptedError, openSqliteJournal, scriptedModel, type Tool } from "loom-agent";

/** A loop with one tool and a scripted model, run on a SQLite journal, stopped mid-tool, resumed. */
export async function quickstart(file = "quickstart.db", log = console.log) {
  const journal = openSqliteJournal(file); // entries, blobs and archive in one file
  const crash = new AbortController();
  let attempts = 0;
  const weather: Tool<{ city: string }> = {
    description: "today's weather in a city",
    execute: ({ city }) => {
      if (++attempts === 1) crash.abort(); // the process "dies" while the tool runs: its outcome is unknown
      return { city, sky: "clear", celsius: 21 };
    },
  };
  const model = scriptedModel([
    { toolCalls: [{ id: "w1", name: "weather", input: { city: "Lisbon" } }] },
    { content: "Clear and 21 °C in Lisbon.", toolCalls: [] },
  ]);
  const loop = agentLoop$({ id: "assistant", model, tools: { weather }, toolCallLog: "lean" });
  const runId = `weather-${Date.now()}`;
  const stopped = await loop.run({ runId, journal, input: "Weather in Lisbon?", signal: crash.signal }).catch((e) => e);
  log(isAgentInterruptedError(stopped) ? `stopped: ${stopped.run.reason}` : stopped);
  const { content, toolCallLog } = await loop.run({ runId, journal }); // resume: the journal knows the rest
  log(content, toolCallLog[0]); // a lean entry: { iteration, toolName, toolInput, status, bytes, digest, stepId }
  await journal.close();
  return { content, toolCallLog, attempts, modelCalls: model.calls };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) await quickstart(process.argv[2]);

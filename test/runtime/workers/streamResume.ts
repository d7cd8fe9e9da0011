/**
 * A streamed run in its own process, to be killed mid-stream and resumed:
 * `streamResume.ts <sqlite file> first` starts run `s-1` with `loop.stream` and prints each event
 * as a JSON line `{ via: "stream", event }` (the test kills it mid-call);
 * `streamResume.ts <sqlite file> second <after>` resumes it, watched four ways at once, each event
 * (or UI chunk) printed as `{ via, event }`: `loop.stream`, its `onEvent`, `followRun` after the
 * cursor `after`, and `toUIMessageStream` of another `followRun` after it. Then it prints `done`.
 */
import { toUIMessageStream } from "../../../src/ai-sdk.ts";
import { openSqliteJournal } from "../../../src/events/journal.ts";
import { scriptedModel } from "../../../src/models/scripted.ts";
import type { RunEvent } from "../../../src/projections/events.ts";
import { agentLoop$ } from "../../../src/runtime/run/agentLoop.ts";
import { followRun } from "../../../src/runtime/streaming/follow.ts";

const [file, phase, afterArg] = process.argv.slice(2) as [string, "first" | "second", string | undefined];
const journal = openSqliteJournal(file);
const loop = agentLoop$({
  id: "w",
  model: scriptedModel(
    [
      {
        content: "Let me look the weather up for you.",
        toolCalls: [{ id: "c1", name: "weather", input: { city: "Lisbon", unit: "celsius" } }],
      },
      { content: "Sunny in Lisbon, 24 degrees.", toolCalls: [] },
    ],
    { deltaDelayMs: phase === "first" ? 40 : 5 },
  ),
  tools: { weather: { description: "the weather", execute: async () => ({ sky: "sunny", degrees: 24 }) } },
});
const print = (via: string, event: unknown) => console.log(JSON.stringify({ via, event }));

if (phase === "first") {
  for await (const event of loop.stream({ runId: "s-1", input: "weather in Lisbon?", journal })) print("stream", event);
} else {
  const after = Number(afterArg);
  // Both followers listen before the run resumes (their first read starts now): they get its deltas.
  const follow = (async () => {
    for await (const event of followRun(journal, "s-1", { after })) print("follow", event);
  })();
  const ui = (async () => {
    for await (const chunk of toUIMessageStream(followRun(journal, "s-1", { after }))) print("ui", chunk);
  })();
  const stream = loop.stream({ runId: "s-1", journal, onEvent: (event: RunEvent) => print("onEvent", event) });
  for await (const event of stream) print("stream", event);
  await stream.output;
  await Promise.all([follow, ui]);
}
console.log("done");
await journal.close();

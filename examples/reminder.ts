import {
  agentLoop$,
  isAgentInterruptedError,
  openSqliteJournal,
  scriptedModel,
  sleepTool,
  wakeDueRuns,
} from "loom-agent";

const DAY = 86_400_000;

/** A reminder agent: the model sleeps 3 days (durably, holding no process), then reminds. */
export function reminderLoop(sent: string[] = []) {
  const model = scriptedModel([
    { toolCalls: [{ id: "s", name: "sleep", input: { seconds: 3 * 86_400, reason: "check order 42 again" } }] },
    { toolCalls: [{ id: "n", name: "notify", input: { text: "Order 42: has it shipped?" } }] },
    { content: "I checked back on order 42 after 3 days.", toolCalls: [] },
  ]);
  const notify = {
    description: "sends the user a message",
    execute: ({ text }: { text: string }) => {
      sent.push(text); // in real life: a message to the user
      return { sent: true };
    },
  };
  return agentLoop$({ id: "reminder", model, tools: { sleep: sleepTool, notify } });
}

/** Starts the run, then wakes it from "other processes" a day and three days later (a fake clock). */
export async function reminder(file = "reminder.db", log = console.log, start = Date.now()) {
  const runId = `reminder-${start}`;
  let journal = openSqliteJournal(file);
  const stopped = await reminderLoop()
    .run({ runId, journal, input: "Remind me to check order 42 in 3 days", now: () => start })
    .catch((e) => e);
  if (!isAgentInterruptedError(stopped)) throw stopped;
  log(`${stopped.run.reason}:`, stopped.run.waits.map((w) => `${w.what} until ${w.until}`).join(", "));
  await journal.close(); // nothing runs while the run sleeps

  const sent: string[] = [];
  const loops = [reminderLoop(sent)]; // what `loom wake --loops <module>` or a cron job would load
  journal = openSqliteJournal(file);
  const tomorrow = await wakeDueRuns(journal, { loops, now: () => start + DAY });
  log("a day later:", tomorrow.map((w) => `${w.runId} ${w.outcome}`).join(", "));
  const due = await wakeDueRuns(journal, { loops, now: () => start + 3 * DAY });
  log("3 days later:", due.map((w) => `${w.runId} ${w.outcome}`).join(", "), sent);
  await journal.close();
  return { runId, tomorrow, due, sent };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) await reminder(process.argv[2]);

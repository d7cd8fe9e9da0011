/**
 * A process of test/runtime/scheduleFaults.test.ts: the embedded scheduler (`startSchedules`) on
 * the SQLite file <db>, firing the every-second schedule "tick" from <startAtMs> on, by the clock
 * the test writes in <clockFile> plus <skewMs> (a clock that runs ahead). Its model appends
 * `<tick> <pid>` to <execLog> and answers <holdMs> later, so that a kill can land mid-tick. Prints
 * `ready`, then `fired <runId>` and `resumed <runId>` for each run it starts or resumes, and
 * `calling <tick>` at each model call. SIGTERM stops it (the runs in hand finish first).
 *
 *   node --import tsx test/runtime/workers/scheduleProcess.ts <db> <clockFile> <skewMs> <startAtMs> <execLog> <holdMs>
 */
import { appendFileSync, readFileSync } from "node:fs";
import { openSqliteJournal } from "../../../src/events/journal.ts";
import { scriptedModel } from "../../../src/models/scripted.ts";
import { agentLoop$ } from "../../../src/runtime/run/agentLoop.ts";
import { startSchedules } from "../../../src/runtime/run/runSchedules.ts";
import { schedule } from "../../../src/runtime/run/schedule.ts";

const [db, clockFile, skewMs, startAtMs, execLog, holdMs] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
];
const journal = openSqliteJournal(db);
const loop = agentLoop$({
  id: "ticker",
  model: scriptedModel(async ({ messages }) => {
    const first = messages.find((m) => m.role === "user");
    const input = first?.role === "user" ? String(first.content) : "?";
    appendFileSync(execLog, `${input} ${process.pid}\n`);
    console.log(`calling ${input}`);
    await new Promise((r) => setTimeout(r, Number(holdMs)));
    return { content: `done ${input}`, toolCalls: [] };
  }),
});
const ticks = schedule({
  id: "tick",
  cron: "* * * * * *",
  loop,
  input: (tick) => tick.toISOString(),
  missed: "latest",
  startAt: new Date(Number(startAtMs)),
});
const scheduler = startSchedules(journal, [ticks], {
  now: () => new Date(Number(readFileSync(clockFile, "utf8")) + Number(skewMs)),
  pollMs: 10,
  onTicks: (report) => {
    for (const f of report.fired) console.log(`fired ${f.runId}`);
    for (const r of report.resumed ?? []) console.log(`resumed ${r.runId}`);
  },
  onError: (e, runId) => console.error(`run ${runId}: ${String(e)}`),
});
await journal.store.listRuns(); // the file is open before the test is told we are ready
console.log("ready");

process.on("SIGTERM", () => {
  void scheduler
    .stop()
    .then(() => journal.close())
    .then(() => process.exit(0));
});

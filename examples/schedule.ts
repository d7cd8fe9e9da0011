import { agentLoop$, type Journal, schedule, scriptedModel, startSchedules, type Tool } from "loom-agent";

/** The morning digest agent: it reads the day's inbox with a tool, then writes the digest. */
export function digestLoop(inbox: (day: string) => string[]) {
  const readInbox: Tool<{ day: string }> = {
    description: "the messages that came in on a day (YYYY-MM-DD)",
    execute: ({ day }) => ({ day, messages: inbox(day) }),
  };
  const model = scriptedModel(({ turn, messages }) => {
    const asked = messages.find((m) => m.role === "user");
    const day = asked?.role === "user" ? String(asked.content).slice(-10) : "?"; // "Write the digest for 2026-03-02"
    if (turn === 0) return { toolCalls: [{ id: "inbox", name: "read_inbox", input: { day } }] };
    return { content: `Digest for ${day}: ${inbox(day).length} messages.`, toolCalls: [] };
  });
  return agentLoop$({ id: "digest", model, tools: { read_inbox: readInbox } });
}

/** Weekdays at 7:00 in Paris; each tick's run is `morning-digest@<tick>`, so it runs once. */
export const morningDigest = (loop: ReturnType<typeof digestLoop>) =>
  schedule({
    id: "morning-digest",
    cron: "0 7 * * 1-5",
    timezone: "Europe/Paris",
    loop,
    input: (tick) => `Write the digest for ${tick.toISOString().slice(0, 10)}`,
    missed: "latest", // after an outage, one catch-up digest, not one per missed morning
  });

const HOUR = 3_600_000;

/**
 * A week of mornings in a moment: the scheduler reads a clock that moves an hour at each look. In a
 * program, leave `now` out (the wall clock), start it once, and `await scheduler.stop()` on SIGTERM.
 */
export async function aWeekOfDigests(journal: Journal, from: Date, inbox: (day: string) => string[]) {
  const end = from.getTime() + 7 * 24 * HOUR;
  let clock = from.getTime();
  let weekOver = () => {};
  const over = new Promise<void>((resolve) => {
    weekOver = resolve;
  });
  const fired: string[] = [];
  const scheduler = startSchedules(journal, [morningDigest(digestLoop(inbox))], {
    now: () => {
      clock = Math.min(clock + HOUR, end);
      if (clock === end) weekOver();
      return new Date(clock);
    },
    pollMs: 1, // look again at once: the clock is fake
    onTicks: (report) => fired.push(...report.fired.map((f) => f.runId)),
  });
  await over;
  await scheduler.stop(); // no tick after this; the digest being written is finished first
  return fired;
}

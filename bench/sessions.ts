/**
 * Sessions in linear space: a session of `--messages` messages (default 1,000) sent with
 * `loop.send` to a SQLite journal, each message one tool call and an answer. Prints what the
 * session stores against the sum of its messages' own entries (each run's entries with its input
 * cut to the message it adds: its model and tool frames, its start and its end), and how long
 * `sessionHistory` takes at message 10 and at the last one, in the process that sent them (the
 * histories it rebuilt kept in memory) and on a fresh open of the file (the names walked back
 * once). The same session journaled the old way (each run's input a copy of the whole history) is
 * measured at `--old` messages (default 250) for comparison.
 *
 *   node --import tsx bench/sessions.ts [--messages 1000] [--old 250] [--repeats 9]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openSqliteJournal, readJournal } from "../src/events/journal.ts";
import type { Journal } from "../src/events/spi.ts";
import type { JournalEntry, Message, ModelResponse } from "../src/events/types.ts";
import { agentLoop$, scriptedModel, sessionHistory, type Tool } from "../src/index.ts";
import { printResult, printTable } from "./support.ts";

const { values } = parseArgs({
  options: { messages: { type: "string" }, old: { type: "string" }, repeats: { type: "string" } },
});
const MESSAGES = Number(values.messages ?? 1000);
const OLD = Number(values.old ?? 250);
const REPEATS = Number(values.repeats ?? 9);
const EARLY = 10;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

function chatLoop() {
  const lookup: Tool<{ about: string }> = {
    description: "looks a topic up",
    execute: ({ about }) => ({ note: `notes on ${about}`, source: "the almanac", page: about.length }),
  };
  const model = scriptedModel(({ messages }): ModelResponse => {
    const last = messages.at(-1) as Message;
    if (last.role === "user") {
      return {
        toolCalls: [{ id: `c${messages.length}`, name: "lookup", input: { about: last.content } }],
        usage: { inputTokens: 40, outputTokens: 8 },
      };
    }
    const note = last.role === "tool" ? JSON.stringify(last.output) : "";
    return { content: `Here is what I found: ${note}`, toolCalls: [], usage: { inputTokens: 60, outputTokens: 20 } };
  });
  return agentLoop$({ id: "chat", model, tools: { lookup }, system: "You are a helpful assistant." });
}

const topic = (n: number) => `the tides of week ${n} at the harbour`;

/** Sends `count` messages to `sessionId`, the new way (`loop.send`) or the old (the history copied). */
async function fill(journal: Journal, sessionId: string, count: number, old: boolean): Promise<void> {
  const loop = chatLoop();
  for (let n = 0; n < count; n++) {
    if (!old) await loop.send({ sessionId, journal, message: topic(n) });
    else {
      const input = [...(await sessionHistory(journal, sessionId)), { role: "user" as const, content: topic(n) }];
      await loop.run({ runId: `${sessionId}/${n}`, journal, input });
    }
  }
}

const bytesOf = (e: JournalEntry) => Buffer.byteLength(JSON.stringify(e.data));

/** What a session stores, and what its messages' own entries are (each input cut to its new message). */
async function storage(journal: Journal, sessionId: string, count: number) {
  let stored = 0;
  let own = 0;
  let frames = 0;
  for (let n = 0; n < count; n++) {
    for (const e of await readJournal(journal, `${sessionId}/${n}`)) {
      const size = bytesOf(e);
      stored += size;
      if (e.type === "frame.started" || e.type === "frame.completed") frames += size;
      if (e.type !== "run.started" || !Array.isArray(e.data.input)) own += size;
      else {
        const added = e.data.input.slice(-1); // the message this run adds
        const { continues: _named, ...data } = e.data;
        own += Buffer.byteLength(JSON.stringify({ ...data, input: added }));
      }
    }
  }
  return { stored, own, frames };
}

async function historyMs(file: string, sessionId: string, warm: Journal | undefined): Promise<number> {
  const journal = warm ?? openSqliteJournal(file, { readonly: true });
  try {
    const t0 = performance.now();
    await sessionHistory(journal, sessionId);
    return performance.now() - t0;
  } finally {
    if (warm === undefined) await (journal as ReturnType<typeof openSqliteJournal>).close();
  }
}

const dir = mkdtempSync(join(tmpdir(), "loom-bench-sessions-"));
try {
  const rows: Record<string, string | number>[] = [];
  const result: Record<string, unknown> = {};
  for (const [format, count] of [
    ["linear", MESSAGES],
    ["old (copied)", OLD],
  ] as const) {
    const old = format !== "linear";
    const file = join(dir, `${old ? "old" : "linear"}.db`);
    const journal = openSqliteJournal(file);
    await fill(journal, "early", EARLY, old);
    const t0 = performance.now();
    await fill(journal, "long", count, old);
    const sendMs = (performance.now() - t0) / count;
    const { stored, own, frames } = await storage(journal, "long", count);
    const warm = { early: [] as number[], long: [] as number[] };
    const cold = { early: [] as number[], long: [] as number[] };
    for (let r = 0; r < REPEATS; r++) {
      for (const s of r % 2 === 0 ? (["early", "long"] as const) : (["long", "early"] as const)) {
        warm[s].push(await historyMs(file, s, journal));
        cold[s].push(await historyMs(file, s, undefined));
      }
    }
    await journal.close();
    const warmRatio = median(warm.long) / median(warm.early);
    const coldRatio = median(cold.long) / median(cold.early);
    rows.push({
      storage: format,
      messages: count,
      "stored MB": Number((stored / 1e6).toFixed(2)),
      "stored / own entries": Number((stored / own).toFixed(3)),
      "stored / frames": Number((stored / frames).toFixed(2)),
      "send ms/message": Number(sendMs.toFixed(2)),
      [`history ms @${EARLY}`]: Number(median(warm.early).toFixed(3)),
      "history ms @last": Number(median(warm.long).toFixed(3)),
      "ratio (same process)": Number(warmRatio.toFixed(2)),
      "fresh open ms @last": Number(median(cold.long).toFixed(1)),
      "ratio (fresh open)": Number(coldRatio.toFixed(1)),
    });
    const key = old ? "old" : "linear";
    result[`${key}_messages`] = count;
    result[`${key}_stored_over_own`] = Number((stored / own).toFixed(3));
    result[`${key}_history_ratio_${count}_vs_${EARLY}`] = Number(warmRatio.toFixed(2));
    result[`${key}_fresh_open_ratio_${count}_vs_${EARLY}`] = Number(coldRatio.toFixed(1));
    if (!old) {
      result.storage_target = "stored <= 1.2 x own entries";
      result.storage_met = stored / own <= 1.2;
      result.history_target = `sessionHistory at ${count} <= 2 x at ${EARLY} (same process)`;
      result.history_met = warmRatio <= 2;
    }
  }
  printTable(`a session on SQLite, sessionHistory median of ${REPEATS}`, rows);
  printResult("sessions", result);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

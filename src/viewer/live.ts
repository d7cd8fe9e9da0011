import type { IncomingMessage, ServerResponse } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { type Journal, readJournal } from "../index.ts";

/**
 * The live run page: a server-sent-events stream of what happens in a run, fed by a
 * {@link LiveSource}. `followRun(journal, runId, { after, signal })` (DESIGN §7.2) is one as it
 * is: its RunEvents carry `type` and, when journaled, `cursor`. Until then
 * {@link pollingSource} reads the journal's new entries after the last seq.
 */

/** One thing that happened in a run: a RunEvent, or anything with a type and the cursor of its entry. */
export interface LiveEvent {
  readonly type: string;
  /** The seq of the entry it comes from; absent on live-only events (deltas). */
  readonly cursor?: number;
  readonly [field: string]: unknown;
}

/**
 * Where the live page's events come from: the run's events after `after`, then the new ones as
 * they happen, until the run ends or `signal` aborts.
 *
 * @example
 * ```ts
 * const live: LiveSource = { follow: (runId, options) => followRun(journal, runId, options) };
 * await startViewer({ journal, live });
 * ```
 */
export interface LiveSource {
  /** The run's events after cursor `after`, ending with the run or with `signal`. */
  follow(runId: string, options: { readonly after: number; readonly signal: AbortSignal }): AsyncIterable<LiveEvent>;
}

/**
 * A {@link LiveSource} that polls the journal every `intervalMs` for entries after the last seq
 * it saw (one indexed read, nothing when nothing was appended), and ends after `run.completed`
 * or `run.failed`. An event per entry: `{ type: <entry type>, cursor: <seq> }`.
 *
 * @example
 * await startViewer({ journal, live: pollingSource(journal, { intervalMs: 500 }) });
 */
export function pollingSource(journal: Journal, options: { readonly intervalMs?: number } = {}): LiveSource {
  const intervalMs = options.intervalMs ?? 500;
  return {
    async *follow(runId, { after, signal }) {
      let last = after;
      while (!signal.aborted) {
        const entries = await readJournal(journal, runId, { from: last + 1 });
        for (const entry of entries) {
          last = entry.seq;
          yield { type: entry.type, cursor: entry.seq };
          if (entry.type === "run.completed" || entry.type === "run.failed") return;
        }
        try {
          await sleep(intervalMs, undefined, { signal });
        } catch {
          return; // aborted: the page went away
        }
      }
    },
  };
}

/**
 * Serves `GET /runs/<id>/live`: an event per LiveEvent (`id:` its cursor, so a reconnecting
 * EventSource resumes after it through `Last-Event-ID`), an `end` event when the source ends,
 * and a comment every 15 s so proxies keep the connection open.
 */
export async function serveLive(
  source: LiveSource,
  runId: string,
  req: IncomingMessage,
  res: ServerResponse,
  after: number,
): Promise<void> {
  const resumeFrom = Number(req.headers["last-event-id"]);
  const from = Number.isSafeInteger(resumeFrom) && resumeFrom > after ? resumeFrom : after;
  const stop = new AbortController();
  const close = () => stop.abort();
  req.on("close", close);
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    connection: "keep-alive",
  });
  res.write("retry: 2000\n\n");
  const keepAlive = setInterval(() => res.write(": keep-alive\n\n"), 15_000);
  try {
    for await (const event of source.follow(runId, { after: from, signal: stop.signal })) {
      if (stop.signal.aborted) break;
      const id = event.cursor === undefined ? "" : `id: ${event.cursor}\n`;
      res.write(`${id}data: ${JSON.stringify(event)}\n\n`);
    }
    if (!stop.signal.aborted) res.write("event: end\ndata: {}\n\n");
  } finally {
    clearInterval(keepAlive);
    req.off("close", close);
    res.end();
  }
}

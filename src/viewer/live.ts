import type { IncomingMessage, ServerResponse } from "node:http";
import { endsItsEntry, followRun, type Journal, type RunEvent } from "../index.ts";

/**
 * The live run page: a server-sent-events stream of what happens in a run, fed by a
 * {@link LiveSource}: by default {@link followSource}, `followRun` on the journal.
 */

/** What the live page is sent: the run's events, as `followRun` and `loop.stream` give them. */
export type LiveEvent = RunEvent;

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
 * The viewer's live source: `followRun` on the journal, the run's RunEvents after
 * the cursor, then as they are appended (SQLite: `PRAGMA data_version`; PostgreSQL: NOTIFY),
 * with the model's deltas when the run goes on in this process.
 *
 * @example
 * await startViewer({ journal, live: followSource(journal) });
 */
export function followSource(journal: Journal): LiveSource {
  // The page shows a sub-agent as a link to its own run: its events stay on its page.
  return { follow: (runId, options) => followRun(journal, runId, { ...options, subRuns: false }) };
}

/** The run page's `#run` part as the live page keeps it: at `seq`, still `live` or not. */
export interface LivePart {
  readonly seq: number;
  readonly live: boolean;
  readonly html: string;
}

/** How long appended entries are gathered before the part is rendered again, in ms. */
const RENDER_AFTER_MS = 50;

/**
 * Serves `GET /runs/<id>/live`: an event per LiveEvent (`id:` its cursor, so a reconnecting
 * EventSource resumes after it through `Last-Event-ID`), an `end` event when the source ends,
 * and a comment every 15 s so proxies keep the connection open. With `render` (the run page's
 * kept `#run` part, see `Pages.liveRun`), each entry appended also gives a `run` event (no id)
 * holding the part rendered at it, the entries of one burst rendered once, the last before `end`.
 */
export async function serveLive(
  source: LiveSource,
  runId: string,
  req: IncomingMessage,
  res: ServerResponse,
  after: number,
  render?: (cursor: number) => Promise<LivePart>,
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
  // The part is rendered once per burst of entries, in order: one render at a time.
  let cursor = 0;
  let timer: NodeJS.Timeout | undefined;
  let rendered: Promise<void> = Promise.resolve();
  let failed: { error: unknown } | undefined; // a render that threw: the stream ends with it
  const flush = () => {
    timer = undefined;
    const at = cursor;
    rendered = rendered.then(async () => {
      if (failed || !render) return;
      try {
        const part = await render(at);
        if (!stop.signal.aborted) res.write(`event: run\ndata: ${JSON.stringify(part)}\n\n`);
      } catch (error) {
        failed = { error };
        stop.abort();
      }
    });
  };
  try {
    for await (const event of source.follow(runId, { after: from, signal: stop.signal })) {
      if (stop.signal.aborted) break;
      const ends = endsItsEntry(event);
      const id = ends ? `id: ${event.cursor}\n` : ""; // a reconnect resumes after the whole entry
      res.write(`${id}data: ${JSON.stringify(event)}\n\n`);
      if (ends && render && event.runId === runId) {
        cursor = Math.max(cursor, event.cursor);
        timer ??= setTimeout(flush, RENDER_AFTER_MS);
      }
    }
    if (timer !== undefined) {
      clearTimeout(timer);
      flush();
    }
    await rendered;
    if (failed) throw failed.error;
    if (!stop.signal.aborted) res.write("event: end\ndata: {}\n\n");
  } finally {
    clearTimeout(timer);
    clearInterval(keepAlive);
    req.off("close", close);
    res.end();
  }
}

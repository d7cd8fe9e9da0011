import type { Journal } from "../index.ts";
import { type JournalEntry, type NewEntry, parseFrameId, SCHEMA_VERSION } from "../journal.ts";
import { entryBytes } from "./db.ts";
import { kB } from "./format.ts";
import type { CliStream } from "./io.ts";

/** Where a run is: the turn being worked on, and what its journal holds. */
export interface Progress {
  readonly turn: number;
  readonly entries: number;
  readonly bytes: number;
}

/** Where a run's journal stands now (the start of a resume's progress). */
export function progressOf(entries: readonly JournalEntry[]): Progress {
  let turn = 0;
  for (const e of entries) {
    const id = e.type === "frame.started" ? e.data.frameId : undefined;
    const parsed = id === undefined ? undefined : parseFrameId(id);
    if (parsed) turn = Math.max(turn, parsed.turn);
  }
  return { turn, entries: entries.length, bytes: entries.reduce((sum, e) => sum + entryBytes(e), 0) };
}

/**
 * The journal with its store's appends counted: `onProgress` hears of every append (entries,
 * bytes as stored, the turn of the latest frame). The loop runs against it unchanged.
 */
export function countingJournal(journal: Journal, start: Progress, onProgress: (p: Progress) => void): Journal {
  const store = journal.store;
  let { turn, entries, bytes } = start;
  return {
    ...journal,
    store: {
      ...store,
      append: async (runId: string, added: readonly NewEntry[], options) => {
        const result = await store.append(runId, added, options);
        const meta = { v: SCHEMA_VERSION, at: new Date().toISOString() }; // what the store writes beside each entry
        for (const e of added) {
          entries++;
          bytes += entryBytes({ ...e, meta });
          const parsed = e.type === "frame.started" ? parseFrameId(e.data.frameId) : undefined;
          if (parsed) turn = Math.max(turn, parsed.turn);
        }
        onProgress({ turn, entries, bytes });
        return result;
      },
      read: store.read.bind(store),
      listRuns: store.listRuns.bind(store),
      compact: store.compact.bind(store),
      close: store.close.bind(store),
    },
  };
}

/**
 * Shows a run's progress on `stream`: a bar redrawn in place on a terminal, otherwise a plain
 * line at every tenth of the run. `note` prints a line without breaking the bar.
 */
export function progressBar(stream: CliStream, total: number | undefined) {
  const tty = stream.isTTY === true;
  let last: Progress | undefined;
  let drawnAt = 0;
  let lastStep = -1;
  let printed = "";
  const text = (p: Progress) =>
    `turn ${p.turn}${total === undefined ? "" : `/${total}`} · ${p.entries} entries · ${kB(p.bytes)} journaled`;
  const draw = (p: Progress) => {
    const width = 24;
    const done = total ? Math.min(width, Math.round((width * p.turn) / total)) : 0;
    const bar = total ? `[${"█".repeat(done)}${"░".repeat(width - done)}] ` : "";
    stream.write(`\r\x1b[K${bar}${text(p)}`);
  };
  return {
    update(p: Progress): void {
      last = p;
      if (tty) {
        const now = Date.now();
        if (now - drawnAt >= 50) {
          drawnAt = now;
          draw(p);
        }
        return;
      }
      const step = total ? Math.floor((10 * p.turn) / total) : Math.floor(p.turn / 20);
      if (step > lastStep) {
        lastStep = step;
        printed = text(p);
        stream.write(`${printed}\n`);
      }
    },
    note(line: string): void {
      stream.write(tty ? `\r\x1b[K${line}\n` : `${line}\n`);
      if (tty && last) draw(last);
    },
    /** Draws the final state and ends the bar's line. */
    done(): void {
      if (tty && last) {
        draw(last);
        stream.write("\n");
      } else if (last && text(last) !== printed) stream.write(`${text(last)}\n`);
    },
  };
}

export type ProgressBar = ReturnType<typeof progressBar>;

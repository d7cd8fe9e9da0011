import type { JournalEntry } from "../../src/events/types.ts";

/** `#turn:<i>:tool:<j>` in a frame, step or decision id: the tool call an entry is about. */
const TOOL_CALL = /#turn:(\d+):tool:(\d+)/;

const callOf = (entry: JournalEntry): { key: string; turn: number; index: number } | undefined => {
  const data = entry.data as { frameId?: unknown; stepId?: unknown; decisionId?: unknown };
  const id = data.frameId ?? data.stepId ?? data.decisionId;
  const m = typeof id === "string" ? TOOL_CALL.exec(id) : null;
  if (m === null) return undefined;
  return {
    key: id === data.decisionId ? (id as string).replace(/:[a-z]+$/, "") : (id as string),
    turn: Number(m[1]),
    index: Number(m[2]),
  };
};

/**
 * A run's journal as a byte-for-byte comparison reads it (docs/tool-call-log.md, "Parallel calls
 * in the journal"): each entry's JSON text without its clock (`meta`) and its `seq` (the line's
 * place says it), in journal order, except
 * that the results of a response's calls (what a call journals once its start is journaled: its
 * completion or failure, its wait, a later attempt) come in the order the tools finished, so each
 * run of them is put in call order. Everything else, the starts included, is compared as it stands.
 *
 * @example
 * expect(journalText(await readJournal(b, "r"))).toEqual(journalText(await readJournal(a, "r")));
 */
export function journalText(entries: readonly JournalEntry[]): string[] {
  const out: string[] = [];
  const started = new Set<string>();
  let results: { turn: number; index: number; text: string }[] = [];
  const flush = () => {
    results.sort((a, b) => a.turn - b.turn || a.index - b.index); // stable: a call's own results keep their order
    for (const r of results) out.push(r.text);
    results = [];
  };
  for (const { meta: _clock, seq: _position, ...entry } of entries) {
    const text = JSON.stringify(entry);
    const call = callOf(entry as JournalEntry);
    const isStart = entry.type === "frame.started" || entry.type === "call.settled";
    if (call !== undefined && started.has(call.key)) {
      results.push({ turn: call.turn, index: call.index, text });
      continue;
    }
    flush();
    if (call !== undefined && isStart) started.add(call.key);
    out.push(text);
  }
  flush();
  return out;
}

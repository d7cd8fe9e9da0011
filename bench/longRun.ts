/**
 * Long runs written straight through the store, entry for entry what the loop writes: a run of
 * one `lookup` call a turn (see {@link longRunLoop}) is journaled as its loop journals it, with
 * the same frame ids, chained prompt digests and output digests, so the loop resumes it (the
 * chart walks its turns, each served and checked against the journal). Running the loop 100,000
 * times would take minutes; writing its entries takes seconds. test/runtime/snapshots.test.ts
 * checks the entries against a run of the loop itself.
 */
import { digestOfRecorded } from "../src/core/digest.ts";
import { createJournal, openSqliteJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import type { Journal } from "../src/events/spi.ts";
import type { EventStore, StoredSnapshot } from "../src/events/store.ts";
import type { Message, ModelResponse, NewEntry, RunStartedData, ToolCall } from "../src/events/types.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import type { AgentLoopConfig } from "../src/runtime/base/config.ts";
import { assistantMessage, chainedPromptDigest, toolResultMessage } from "../src/runtime/base/conversation.ts";
import { writeRunSnapshot } from "../src/runtime/base/snapshots.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";

/** The loop id of a long run. */
export const LONG_LOOP = "long";

/** The output of the `lookup` call of turn `n`: a small search result, different every turn. */
export function lookupOutput(n: number): Record<string, unknown> {
  return {
    query: `q${n % 97}`,
    hits: [
      { id: `doc-${n}`, score: ((n * 7919) % 1000) / 1000, title: `result ${n}` },
      { id: `doc-${n + 1}`, score: ((n * 104729) % 1000) / 1000, title: `result ${n + 1}` },
    ],
    tookMs: n % 50,
  };
}

/**
 * The loop a long run is recorded by: its model calls `lookup` once a turn until turn `turns`,
 * where it answers `"done"`. `extra` is spread into the config (snapshots, maxIterations …).
 */
export function longRunLoop(turns: number, extra: Partial<AgentLoopConfig> = {}) {
  const model = scriptedModel(({ turn }) =>
    turn < turns
      ? { toolCalls: [{ id: `c${turn}`, name: "lookup", input: { n: turn } }] }
      : { content: "done", toolCalls: [] },
  );
  return agentLoop$({
    id: LONG_LOOP,
    model,
    tools: { lookup: { description: "looks a number up", execute: (input: { n: number }) => lookupOutput(input.n) } },
    maxIterations: turns + 1,
    ...extra,
  });
}

/** What `writeLongRun` ends the run with. */
export type LongRunEnd = "completed" | "interrupted";

/**
 * The entries of a long run's `turns` tool turns, in order, as the loop writes them, given the
 * run's `run.started` data (`template`: the loop's own, from a short recorded run), then its end:
 * the final model call and `run.completed`, or `run.interrupted` (aborted) after the last turn.
 */
export function* longRunEntries(template: RunStartedData, turns: number, end: LongRunEnd): Generator<NewEntry> {
  yield { type: "run.started", data: template };
  let promptDigest = "";
  let added: Message[] = [{ role: "user", content: template.input as string }];
  for (let turn = 0; ; turn++) {
    const frameId = `${LONG_LOOP}#turn:${turn}:model`;
    if (turn === turns && end === "interrupted") {
      yield { type: "run.interrupted", data: { reason: "aborted", detail: {} } };
      return;
    }
    promptDigest = chainedPromptDigest(promptDigest, added);
    yield { type: "frame.started", data: { frameId, effect: "model", inputDigest: promptDigest } };
    if (turn === turns) {
      yield { type: "frame.completed", data: { frameId, output: { toolCalls: [], content: "done" } } };
      yield { type: "run.completed", data: { output: { content: "done", iterations: turns + 1 } } };
      return;
    }
    const call: ToolCall = { id: `c${turn}`, name: "lookup", input: { n: turn } };
    const response: ModelResponse = { toolCalls: [call] };
    yield { type: "frame.completed", data: { frameId, output: response } };
    const stepId = `${LONG_LOOP}#turn:${turn}:tool:0`;
    const output = lookupOutput(turn);
    const inputDigest = digestOfRecorded(call.input).digest as string;
    yield { type: "frame.started", data: { frameId: stepId, effect: "tool:lookup", inputDigest } };
    const { digest, bytes } = digestOfRecorded(output);
    yield { type: "frame.completed", data: { frameId: stepId, digest, bytes, output } };
    added = [assistantMessage(response), toolResultMessage(call, { output, isError: false })];
  }
}

/**
 * Writes a long run into `store` in batches of appends (each one transaction), as `longRunEntries`
 * gives it. Resolves to the run's version.
 */
export async function writeLongRun(
  store: EventStore,
  runId: string,
  template: RunStartedData,
  turns: number,
  end: LongRunEnd,
): Promise<number> {
  let version = 0;
  let batch: NewEntry[] = [];
  for (const entry of longRunEntries(template, turns, end)) {
    batch.push(entry);
    if (batch.length === 4000) {
      version = (await store.append(runId, batch, { expectedVersion: version })).version;
      batch = [];
    }
  }
  if (batch.length > 0) version = (await store.append(runId, batch, { expectedVersion: version })).version;
  return version;
}

/** The `run.started` data the long-run loop writes (recorded from a run of it with no tool turn). */
export async function longRunTemplate(): Promise<RunStartedData> {
  const store = memoryStore({ json: true });
  await longRunLoop(0).run({ runId: "template", journal: createJournal({ store }), input: "go" });
  const [started] = await store.read("template");
  if (started?.type !== "run.started") throw new Error("the template run wrote no run.started");
  return started.data;
}

/** The journal with its store's snapshot methods taken away: every read goes through every entry. */
export function withoutSnapshots(journal: Journal): Journal {
  const { writeSnapshot: _w, latestSnapshot: _l, ...store } = journal.store;
  return { ...journal, store: store as EventStore };
}

/**
 * Writes an interrupted long run (`LONG_LOOP`'s run "long") into the SQLite file `file`, with a
 * snapshot (compact when asked) `tail` entries before its end. Resolves to the run's entry count
 * and the snapshot written.
 */
export async function writeSnapshottedRun(
  file: string,
  turns: number,
  options: { readonly tail: number; readonly compact?: boolean },
): Promise<{ entries: number; snapshot: StoredSnapshot }> {
  const journal = openSqliteJournal(file, { synchronous: "normal" });
  try {
    const entries = [...longRunEntries(await longRunTemplate(), turns, "interrupted")];
    const cut = entries.length - options.tail;
    let version = 0;
    const append = async (batch: NewEntry[]) => {
      version = (await journal.store.append("long", batch, { expectedVersion: version })).version;
    };
    for (let i = 0; i < cut; i += 4000) await append(entries.slice(i, Math.min(i + 4000, cut)));
    await writeRunSnapshot(journal, "long", options.compact === true ? { compact: true } : {});
    await append(entries.slice(cut));
    return { entries: entries.length, snapshot: (await journal.store.latestSnapshot?.("long")) as StoredSnapshot };
  } finally {
    await journal.close();
  }
}

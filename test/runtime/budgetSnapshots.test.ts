import { describe, expect, it } from "vitest";
import { contextDecisionId } from "../../src/events/ids.ts";
import { readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { JournalEntry, ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Budget } from "../../src/policies/budget.ts";
import { summarize } from "../../src/policies/context.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { type AgentInterruptedError, isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { readRunState } from "../../src/runtime/base/snapshots.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { crashingStore, jsonJournal } from "../support/loop.ts";

const TURNS = 30;
const SUMMARY_ASK = "Summarize";

/**
 * A loop whose model calls `fetch` on turns 0..TURNS-2 and then answers, each call using 100 input
 * and 10 output tokens; `summarize` asks it for a summary (40 in, 4 out) every 5 turns that fall out.
 * It counts the model calls it was sent, summaries apart.
 */
function reader(snapshots: boolean | "compact") {
  const made = { calls: 0, summaries: 0 };
  const model = scriptedModel(({ messages }): ModelResponse => {
    const first = messages[0];
    if (first?.role === "system" && first.content.startsWith(SUMMARY_ASK)) {
      made.summaries++;
      // The same words in any process: a summary of what it was sent.
      const words = `summary of ${messages.length} messages`;
      return { content: words, toolCalls: [], usage: { inputTokens: 40, outputTokens: 4 } };
    }
    made.calls++;
    const last = messages.at(-1);
    const turn = last?.role === "tool" ? (last.output as { page: number }).page + 1 : 0;
    const usage = { inputTokens: 100, outputTokens: 10 };
    if (turn < TURNS - 1) return { toolCalls: [{ id: `c${turn}`, name: "fetch", input: { page: turn } }], usage };
    return { content: "read them all", toolCalls: [], usage };
  });
  const fetch: Tool = {
    description: "fetches a page",
    execute: (input) => ({ page: (input as { page: number }).page }),
  };
  const loop = agentLoop$({
    id: "reader",
    model: Object.assign(model, { id: "m" }),
    tools: { fetch },
    maxIterations: TURNS + 1,
    context: summarize({ keepTurns: 3, every: 5 }),
    ...(snapshots ? { snapshots: { every: 7, compact: snapshots === "compact" } } : {}),
  });
  return { loop, made };
}

/** What a run journaled, without the times. */
const facts = (entries: readonly JournalEntry[]) => entries.map((e) => [e.seq, e.type, e.data]);

async function stopped(p: Promise<unknown>): Promise<AgentInterruptedError> {
  const e = await p.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!isAgentInterruptedError(e)) throw new Error(`expected an interruption, got ${String(e)}`);
  return e;
}

/** The run stopped by a budget of `first` model calls, then resumed under `second`, then without a limit. */
async function stoppedTwiceThenDone(journal: Journal, snapshots: boolean | "compact", first: Budget, second: Budget) {
  const a = reader(snapshots);
  const one = await stopped(a.loop.run({ runId: "r", journal, input: "read", budget: first }));
  const reads = [await readRunState(journal, "r", { compact: snapshots === "compact" })];
  // Each resume is a new process: a new loop object, nothing kept but the journal (and its snapshots).
  const b = reader(snapshots);
  const two = await stopped(b.loop.run({ runId: "r", journal, budget: second }));
  reads.push(await readRunState(journal, "r", { compact: snapshots === "compact" }));
  const c = reader(snapshots);
  const out = await c.loop.run({ runId: "r", journal });
  const made = [a, b, c].map((x) => x.made);
  return { one: one.run, two: two.run, out, made, reads };
}

describe("a resume from a run snapshot serves context decisions and counts budget usage as a full fold does", () => {
  it.each([
    ["full", true],
    ["compact", "compact"],
  ] as const)(
    "stops at the same call with the same figures, asks for no summary again, and sends the same prompts (%s snapshots)",
    async (_name, kind) => {
      // 12 model calls, then 12 + 20: summaries are made before calls 8, 13, 18, 23 and 28 (each counts one call).
      const first = { modelCalls: 12 };
      const second = { modelCalls: 20 + 12 };
      const withSnapshots = jsonJournal();
      const withoutSnapshots = jsonJournal();
      const snap = await stoppedTwiceThenDone(withSnapshots, kind, first, second);
      const full = await stoppedTwiceThenDone(withoutSnapshots, false, first, second);

      // The resumes did read a snapshot and only the entries after it.
      for (const read of snap.reads) expect(read.snapshotSeq).toBeGreaterThan(0);
      for (const read of full.reads) expect(read.snapshotSeq).toBe(0);

      // The budget: the same call, the same figures, summaries included.
      expect(snap.one.reason).toBe("budget");
      expect(snap.one).toMatchObject({ reason: full.one.reason, iterations: full.one.iterations });
      expect(snap.two).toMatchObject({ reason: "budget", iterations: full.two.iterations });
      const details = async (journal: Journal) =>
        (await readJournal(journal, "r")).filter((e) => e.type === "run.interrupted").map((e) => e.data);
      const interruptions = await details(withSnapshots);
      expect(interruptions).toEqual(await details(withoutSnapshots));
      expect(interruptions[1]).toMatchObject({
        reason: "budget",
        detail: { limit: "modelCalls", used: { modelCalls: 32 }, limits: { modelCalls: 32 } },
      });

      // Context decisions served, not decided again: as many summaries and model calls as a whole run makes.
      const whole = reader(false);
      const wholeJournal = jsonJournal();
      const out = await whole.loop.run({ runId: "r", journal: wholeJournal, input: "read" });
      expect(snap.out.content).toBe(out.content);
      expect(snap.made).toEqual(full.made);
      expect(snap.made.reduce((n, m) => n + m.summaries, 0)).toBe(whole.made.summaries);
      expect(snap.made.reduce((n, m) => n + m.calls, 0)).toBe(whole.made.calls);

      // Byte for byte the journal a full-fold resume writes, and the prompts (digests) of a whole run.
      const entries = await readJournal(withSnapshots, "r");
      expect(facts(entries)).toEqual(facts(await readJournal(withoutSnapshots, "r")));
      const digests = (list: readonly JournalEntry[]) =>
        list
          .filter((e) => e.type === "frame.started" && (e.data as { effect: string }).effect === "model")
          .map((e) => (e.data as { inputDigest: string }).inputDigest);
      expect(digests(entries)).toEqual(digests(await readJournal(wholeJournal, "r")));
      const state = (await readRunState(withSnapshots, "r")).state;
      expect(state.decisions[contextDecisionId("reader", 18)]?.choice).toMatchObject({ asked: { modelCalls: 1 } });
    },
  );
});

describe("a compact snapshot resume with a context policy", () => {
  it("a run that crashes at any append resumes to the journal and prompts of one without snapshots (summaries read the whole conversation)", async () => {
    const whole = reader(false);
    const wholeJournal = jsonJournal();
    await whole.loop.run({ runId: "r", journal: wholeJournal, input: "read" });
    const digests = (list: readonly JournalEntry[]) =>
      list
        .filter((e) => e.type === "frame.started" && (e.data as { effect: string }).effect === "model")
        .map((e) => (e.data as { inputDigest: string }).inputDigest);
    const expected = digests(await readJournal(wholeJournal, "r"));
    for (const k of [9, 15, 22, 31, 40]) {
      const journaled: string[] = [];
      let compactResumes = 0;
      for (const snapshots of ["compact", false] as const) {
        const journal = jsonJournal();
        const crashing = { ...journal, store: crashingStore(journal.store, k) };
        await reader(snapshots)
          .loop.run({ runId: "r", journal: crashing, input: "read" })
          .then(
            () => undefined,
            () => undefined,
          );
        if (snapshots === "compact") {
          const read = await readRunState(journal, "r", { compact: true });
          if (read.state.compacted !== undefined) compactResumes++;
        }
        const out = await reader(snapshots).loop.run({ runId: "r", journal, input: "read" });
        expect(out.content, `crash at append ${k}`).toBe("read them all");
        const entries = await readJournal(journal, "r");
        // A call the crash cut off is started again with the same prompt: each prompt once, in order.
        expect([...new Set(digests(entries))], `crash at append ${k}`).toEqual(expected);
        journaled.push(JSON.stringify(facts(entries)));
      }
      expect(journaled[0], `crash at append ${k}`).toBe(journaled[1]);
      if (k >= 22) expect(compactResumes, `crash at append ${k}: resumed from a compact snapshot`).toBe(1);
    }
  });
});

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { digestOf } from "../../src/core/digest.ts";
import { memoryArchive } from "../../src/events/archive.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { ArchivedFrame, Journal } from "../../src/events/spi.ts";
import type { ArchivedFrameDigest, EntryOf, ModelResponse } from "../../src/events/types.ts";
import { openSqliteJournal } from "../../src/index.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { type Budget, type BudgetBreach, NO_USAGE, shareBudget } from "../../src/policies/budget.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { type AgentInterruptedError, isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";
import { jsonJournal } from "../support/loop.ts";
import { startWorker } from "../support/processes.ts";

const add: Tool = { description: "adds", execute: (input) => (input as { a: number }).a + 1 };

async function interrupted(p: Promise<unknown>): Promise<AgentInterruptedError> {
  const e = await p.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!isAgentInterruptedError(e)) throw new Error(`expected an interruption, got ${String(e)}`);
  return e;
}

/** The model calls every run of the journal recorded (completed model frames), and their input tokens. */
async function spent(journal: Journal): Promise<{ calls: number; inputTokens: number }> {
  let calls = 0;
  let inputTokens = 0;
  for (const { runId } of await journal.store.listRuns()) {
    for (const e of await readJournal(journal, runId)) {
      if (e.type !== "frame.completed" || !e.data.frameId.endsWith(":model")) continue;
      calls++;
      inputTokens += (e.data.output as ModelResponse).usage?.inputTokens ?? 0;
    }
  }
  return { calls, inputTokens };
}

/** The limits a run stopped on (its `run.interrupted` detail), or undefined. */
async function stoppedOn(journal: Journal, runId: string): Promise<BudgetBreach | undefined> {
  const last = (await readJournal(journal, runId)).at(-1);
  return last?.type === "run.interrupted" && last.data.reason === "budget"
    ? (last.data.detail as BudgetBreach)
    : undefined;
}

/**
 * A parent whose first response starts `fanOut` helper sub-agents at once, each of which would call
 * `add` ten times before answering; every model call reports 100 input tokens. `gate`, when given,
 * holds each child's tool until it resolves.
 */
function family(fanOut: number, gate?: () => Promise<void>) {
  const usage = { inputTokens: 100, outputTokens: 1 };
  const childModel = scriptedModel(
    ({ turn }): ModelResponse =>
      turn < 10
        ? { toolCalls: [{ id: `k${turn}`, name: "add", input: { a: turn } }], usage }
        : { content: "child done", toolCalls: [], usage },
  );
  const gated: Tool = {
    description: "adds",
    execute: async (input, ctx) => {
      await gate?.();
      return add.execute(input, ctx);
    },
  };
  const child = agentLoop$({ id: "child", model: childModel, tools: { add: gated } });
  const parentModel = scriptedModel(
    ({ turn }): ModelResponse =>
      turn === 0
        ? {
            toolCalls: Array.from({ length: fanOut }, (_, i) => ({
              id: `p${i}`,
              name: "helper",
              input: { prompt: `q${i}` },
            })),
            usage,
          }
        : { content: "parent done", toolCalls: [], usage },
  );
  const parent = agentLoop$({
    id: "parent",
    model: parentModel,
    tools: { helper: agentTool(child, { description: "helps" }) },
  });
  return { parent, parentModel, childModel };
}

const childOf = (i: number) => `p/parent#turn:0:tool:${i}`;

describe("shareBudget: a pure split of what is left", () => {
  it("splits whole figures in whole numbers that add up to what is left, cost evenly, and keeps the prices", () => {
    const prices = { m: { inputPerMillion: 1, outputPerMillion: 1 } };
    const budget: Budget = { modelCalls: 6, inputTokens: 1_000, cost: 0.5, prices };
    const used = { modelCalls: 1, inputTokens: 101, outputTokens: 0, cost: 0.1 };
    const shares = [0, 1, 2, 3].map((i) => shareBudget(budget, used, 4, i));
    expect(shares.map((s) => s.modelCalls)).toEqual([1, 1, 1, 2]);
    expect(shares.map((s) => s.inputTokens)).toEqual([224, 225, 225, 225]);
    expect(shares.reduce((n, s) => n + (s.cost ?? 0), 0)).toBeCloseTo(0.4, 12);
    expect(shares.every((s) => s.prices === prices && s.outputTokens === undefined)).toBe(true);
    // Nothing left: every share is 0; one share is all that is left.
    expect(shareBudget({ modelCalls: 2 }, { ...NO_USAGE, modelCalls: 3 }, 3, 2)).toEqual({ modelCalls: 0 });
    expect(shareBudget({ modelCalls: 6 }, { ...NO_USAGE, modelCalls: 1 }, 1, 0)).toEqual({ modelCalls: 5 });
  });
});

describe("budgets shared by sub-agents started together", () => {
  it("four sub-agents of one response share the parent's model calls: the family stays within the budget", async () => {
    const journal = jsonJournal();
    const { parent, parentModel, childModel } = family(4);
    const e = await interrupted(parent.run({ runId: "p", journal, input: "go", budget: { modelCalls: 6 } }));
    expect(e.run.reason).toBe("budget");
    // The parent's one call and the children's five: never past the budget (each child used to get all 5).
    expect(parentModel.calls + childModel.calls).toBeLessThanOrEqual(6);
    expect((await spent(journal)).calls).toBe(parentModel.calls + childModel.calls);
    const limits = await Promise.all([0, 1, 2, 3].map(async (i) => (await stoppedOn(journal, childOf(i)))?.limits));
    expect(limits).toEqual([{ modelCalls: 1 }, { modelCalls: 1 }, { modelCalls: 1 }, { modelCalls: 2 }]);
    // The split is one journaled decision, made before the first child ran.
    const decisions = (await readJournal(journal, "p")).filter(
      (x): x is EntryOf<"decision.recorded"> =>
        x.type === "decision.recorded" && x.data.decisionId === "parent#turn:0:budget",
    );
    expect(decisions.map((d) => d.data.choice)).toEqual([
      {
        used: { modelCalls: 1, inputTokens: 100, outputTokens: 1, cost: 0 },
        stepIds: [0, 1, 2, 3].map(childOf).map((id) => id.slice(2)),
      },
    ]);
  });

  it("sub-agents of sub-agents share their parent's share: a two-level family stays within the budget", async () => {
    const journal = jsonJournal();
    const leafModel = scriptedModel(
      ({ turn }): ModelResponse => ({
        toolCalls: [{ id: `k${turn}`, name: "add", input: { a: turn } }],
      }),
    );
    const leaf = agentLoop$({ id: "leaf", model: leafModel, tools: { add } });
    const fanOut = (id: string, tool: string, tools: Record<string, Tool>) => {
      const model = scriptedModel(
        ({ turn }): ModelResponse =>
          turn === 0
            ? { toolCalls: [0, 1].map((i) => ({ id: `${id}${i}`, name: tool, input: { prompt: `q${i}` } })) }
            : { content: `${id} done`, toolCalls: [] },
      );
      return { model, loop: agentLoop$({ id, model, tools }) };
    };
    const mid = fanOut("mid", "leaf", { leaf: agentTool(leaf, { description: "leaf" }) });
    const top = fanOut("top", "mid", { mid: agentTool(mid.loop, { description: "mid" }) });
    await interrupted(top.loop.run({ runId: "t", journal, input: "go", budget: { modelCalls: 10 } }));
    // 9 left after the top's call: the mids get 4 and 5, each spends 1 and splits the rest between its leaves.
    expect(top.model.calls + mid.model.calls + leafModel.calls).toBe(10);
    expect((await spent(journal)).calls).toBe(10);
  });

  it("shares tokens too: each child stops at its share, passing it by one call at most", async () => {
    const journal = jsonJournal();
    const { parent } = family(4);
    await interrupted(parent.run({ runId: "p", journal, input: "go", budget: { inputTokens: 1_000 } }));
    // 900 left after the parent's first call: 225 each, so each child makes 3 calls of 100.
    for (let i = 0; i < 4; i++) expect((await stoppedOn(journal, childOf(i)))?.limits).toEqual({ inputTokens: 225 });
    const { inputTokens } = await spent(journal);
    expect(inputTokens).toBe(100 + 4 * 300); // each child used to be given all 900
    expect((await stoppedOn(journal, "p"))?.used.inputTokens).toBe(inputTokens);
  });

  it("a parent stopped while its sub-agents run resumes them with the shares journaled before they started", async () => {
    const journal = jsonJournal();
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let waiting = 0;
    let allWaiting: () => void = () => {};
    const four = new Promise<void>((resolve) => {
      allWaiting = resolve;
    });
    const first = family(4, () => {
      if (++waiting === 4) allWaiting();
      return held;
    });
    const abort = new AbortController();
    const run = first.parent.run({ runId: "p", journal, input: "go", budget: { modelCalls: 6 }, signal: abort.signal });
    await four; // each child has made its first model call and waits in its tool
    abort.abort();
    release();
    expect((await interrupted(run)).run.reason).toBe("aborted");
    expect(await spent(journal)).toMatchObject({ calls: 5 });

    // Resumed: the shares are served, not decided again from the usage the children have now.
    const second = family(4);
    const e = await interrupted(second.parent.run({ runId: "p", journal, budget: { modelCalls: 6 } }));
    expect(e.run.reason).toBe("budget");
    const limits = await Promise.all([0, 1, 2, 3].map(async (i) => (await stoppedOn(journal, childOf(i)))?.limits));
    expect(limits).toEqual([{ modelCalls: 1 }, { modelCalls: 1 }, { modelCalls: 1 }, { modelCalls: 2 }]);
    expect((await spent(journal)).calls).toBe(6);
    const decisions = (await readJournal(journal, "p")).filter(
      (x) => x.type === "decision.recorded" && x.data.decisionId === "parent#turn:0:budget",
    );
    expect(decisions).toHaveLength(1);
  });
});

describe("a session's budget", () => {
  it("holds across the session's messages: the message past it stops before its model call", async () => {
    const journal = jsonJournal();
    const model = scriptedModel(() => ({ content: "hi", toolCalls: [], usage: { inputTokens: 40, outputTokens: 1 } }));
    const loop = agentLoop$({ id: "chat", model });
    const budget = { inputTokens: 100 };
    for (const message of ["a", "b", "c"]) await loop.send({ sessionId: "s", journal, message, budget });
    const e = await interrupted(loop.send({ sessionId: "s", journal, message: "d", budget }));
    expect(e.run).toMatchObject({ runId: "s/3", reason: "budget" });
    expect(model.calls).toBe(3); // 120 tokens spent by the first three: the fourth is not asked
    expect((await stoppedOn(journal, "s/3"))?.used).toEqual({
      modelCalls: 3,
      inputTokens: 120,
      outputTokens: 3,
      cost: 0,
    });
    // Resumed with the same budget it stops again (the session's usage was recorded with its start); raised, it answers.
    await interrupted(loop.run({ runId: "s/3", journal, budget }));
    expect(model.calls).toBe(3);
    expect((await loop.run({ runId: "s/3", journal, budget: { inputTokens: 1_000 } })).content).toBe("hi");
    // The next message counts all four.
    const fifth = await interrupted(loop.send({ sessionId: "s", journal, message: "e", budget: { inputTokens: 160 } }));
    expect(fifth.run.runId).toBe("s/4");
    expect((await stoppedOn(journal, "s/4"))?.used.inputTokens).toBe(160);
  });

  it("the sub-agents of a session's message share what the session has left", async () => {
    const journal = jsonJournal();
    const { parent: helper } = family(0); // a loop that answers at once: one call
    const model = scriptedModel(
      ({ messages }): ModelResponse =>
        messages.at(-1)?.role === "user"
          ? { toolCalls: [0, 1].map((i) => ({ id: `h${i}`, name: "helper", input: { prompt: `q${i}` } })) }
          : { content: "answered", toolCalls: [] },
    );
    const parent = agentLoop$({ id: "chat", model, tools: { helper: agentTool(helper, { description: "helps" }) } });
    const budget = { modelCalls: 6 };
    // Message 0: the call that asks two helpers, their answers (one call each), the answer: 4.
    expect((await parent.send({ sessionId: "s", journal, message: "one", budget })).content).toBe("answered");
    // Message 1: 4 used before it, 1 by its first call: its helpers share the 1 left (0 and 1).
    const e = await interrupted(parent.send({ sessionId: "s", journal, message: "two", budget }));
    expect(e.run).toMatchObject({ runId: "s/1", reason: "budget" });
    const limits = await Promise.all(
      [0, 1].map(async (i) => (await stoppedOn(journal, `s/1/chat#turn:0:tool:${i}`))?.limits),
    );
    expect(limits).toEqual([{ modelCalls: 0 }, undefined]); // the second helper answered with its one call
    expect((await spent(journal)).calls).toBe(6);
  });

  it("a message sent without a budget is held to the loop's budget per run", async () => {
    const journal = jsonJournal();
    const model = scriptedModel(() => ({ content: "hi", toolCalls: [], usage: { inputTokens: 40, outputTokens: 1 } }));
    const loop = agentLoop$({ id: "chat", model, budget: { inputTokens: 100 } });
    for (const message of ["a", "b", "c", "d"]) await loop.send({ sessionId: "s", journal, message });
    expect(model.calls).toBe(4);
  });
});

/**
 * Moves every completed frame of `runId` (model frames too, which `compact` keeps) to the journal's
 * archive behind one `frames.archived` marker, through the store's own compaction step: a journal
 * another compaction could have written.
 */
async function archiveAllFrames(journal: Journal, runId: string): Promise<void> {
  const entries = await readJournal(journal, runId);
  const started = new Map<string, EntryOf<"frame.started">>();
  const moved: ArchivedFrame[] = [];
  const digests: Record<string, ArchivedFrameDigest> = {};
  for (const e of entries) {
    if (e.type === "frame.started") started.set(e.data.frameId, e);
    if (e.type !== "frame.completed") continue;
    const start = started.get(e.data.frameId) as EntryOf<"frame.started">;
    moved.push({ frameId: e.data.frameId, started: start, completed: e });
    const d = digestOf(e.data.output);
    digests[e.data.frameId] = { ...d, effect: start.data.effect, inputDigest: start.data.inputDigest };
  }
  const seqs = moved.flatMap((f) => [f.started.seq, f.completed.seq]).sort((a, b) => a - b);
  const { ref } = await (journal.archive as NonNullable<Journal["archive"]>).put(runId, moved);
  await journal.store.compact(runId, {
    removeSeqs: seqs,
    expectedVersion: entries.at(-1)?.seq ?? 0,
    marker: {
      type: "frames.archived",
      data: { frameIds: moved.map((f) => f.frameId), archiveRef: ref, digests, seqs },
    },
  });
}

describe("budgets after compaction", () => {
  const compacting = () => createJournal({ store: memoryStore({ json: true }), archive: memoryArchive() });

  it("a run compacted after its budget stopped it stops again at the same call when resumed", async () => {
    const journal = compacting();
    const model = scriptedModel(
      ({ turn }): ModelResponse => ({
        toolCalls: [{ id: `c${turn}`, name: "add", input: { a: turn } }],
        usage: { inputTokens: 100, outputTokens: 1 },
      }),
    );
    const loop = agentLoop$({ id: "b", model, tools: { add } });
    await interrupted(loop.run({ runId: "r", journal, input: "go", budget: { inputTokens: 300 } }));
    expect((await compact(journal, "r", { keepTurns: 0 })).frameIds).toHaveLength(3);
    const e = await interrupted(loop.run({ runId: "r", journal, budget: { inputTokens: 300 } }));
    expect(e.run.reason).toBe("budget");
    expect(model.calls).toBe(3);
    expect((await stoppedOn(journal, "r"))?.used).toMatchObject({ modelCalls: 3, inputTokens: 300 });
  });

  it("counts the tokens of a sub-agent's model frames moved to the archive", async () => {
    const journal = compacting();
    const { parent, parentModel } = family(1);
    // The child gets 400 of 500: it makes 4 calls and stops, failing its call; the parent is told.
    const first = parent.run({ runId: "p", journal, input: "go", budget: { inputTokens: 500, modelCalls: 6 } });
    await interrupted(first);
    expect((await stoppedOn(journal, "p"))?.used.inputTokens).toBe(500);
    await archiveAllFrames(journal, childOf(0));
    expect((await readJournal(journal, childOf(0))).some((e) => e.type === "frame.completed")).toBe(false);
    // Resumed with the same budget, the child's 400 tokens still count: no model call is made.
    const calls = parentModel.calls;
    const e = await interrupted(parent.run({ runId: "p", journal, budget: { inputTokens: 500, modelCalls: 6 } }));
    expect(e.run.reason).toBe("budget");
    expect(parentModel.calls).toBe(calls);
    expect((await stoppedOn(journal, "p"))?.used).toMatchObject({ modelCalls: 5, inputTokens: 500 });
  });
});

describe("budgets shared by sub-agents, across a kill", () => {
  const dir = mkdtempSync(join(tmpdir(), "loom-budget-shares-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("a parent SIGKILLed while its four sub-agents run is resumed with the shares it journaled, within its budget", async () => {
    const db = join(dir, "family.db");
    const counts = join(dir, "counts.txt");
    writeFileSync(counts, "");
    const script = "test/fixtures/budgetFamilyProcess.ts";
    const first = startWorker(script, [db, counts, "crash"]);
    await first.waitFor(
      () => first.lines.filter((l) => l === "tool-started").length === 4,
      "the four children's tools",
    );
    first.child.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");

    const second = startWorker(script, [db, counts, "resume"]);
    const done = await second.waitFor((l) => l.startsWith("{"), "the parent's end");
    expect((await second.exited).code, second.stderr()).toBe(0);
    expect(JSON.parse(done)).toEqual({ reason: "budget" });
    // Every model call of both processes: the parent's first, the children's, never past 6.
    const calls = readFileSync(counts, "utf8").split("\n").filter(Boolean);
    expect(calls.length).toBeLessThanOrEqual(6);
    const journal = openSqliteJournal(db);
    try {
      const limits = await Promise.all([0, 1, 2, 3].map(async (i) => (await stoppedOn(journal, childOf(i)))?.limits));
      expect(limits).toEqual([{ modelCalls: 1 }, { modelCalls: 1 }, { modelCalls: 1 }, { modelCalls: 2 }]);
      const decisions = (await readJournal(journal, "p")).filter(
        (x) => x.type === "decision.recorded" && x.data.decisionId === "parent#turn:0:budget",
      );
      expect(decisions).toHaveLength(1);
      expect((await spent(journal)).calls).toBe(calls.length);
    } finally {
      await journal.close();
    }
  });
});

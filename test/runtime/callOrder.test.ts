/**
 * The calls of one model response journal their starts in call order, all before any of their
 * results, whatever order their checks and tools finish in: two runs of the same script journal
 * the same entries, byte for byte, up to the order of the results (docs/tool-call-log.md,
 * "Parallel calls in the journal"). The tools here take random times to check and to run, so the
 * order they finish in changes from run to run.
 */
import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { JournalEntry, ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { CallOrder } from "../../src/runtime/steps/callOrder.ts";
import { journalText } from "../support/journalText.ts";
import { jsonJournal } from "../support/loop.ts";

const RUNS = 20;
const TURNS = 3;

/** 0 to `ms` ms, at random: how long a check or a tool takes in this run. */
const jitter = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.floor(Math.random() * ms)));

/** Six calls a turn: checked and run at random speeds, one refused, one for a tool that asks for approval. */
function response(turn: number): ModelResponse {
  if (turn >= TURNS) return { content: "done", toolCalls: [] };
  return {
    content: `turn ${turn}`,
    toolCalls: [
      { id: `${turn}.0`, name: "fetch", input: { page: turn, part: 0 } },
      { id: `${turn}.1`, name: "fetch", input: { page: turn, part: 1 } },
      { id: `${turn}.2`, name: "no_such_tool", input: { turn } },
      { id: `${turn}.3`, name: "transfer", input: { amount: turn + 1 } },
      { id: `${turn}.4`, name: "fetch", input: { page: turn, part: 4 } },
      { id: `${turn}.5`, name: "sum", input: { a: turn, b: 1 } },
    ],
  };
}

function jitteredLoop() {
  const fetch: Tool<{ page: number; part: number }> = {
    description: "fetches a part of a page",
    validateInput: async (input) => {
      await jitter(4);
      return { ok: true, value: input };
    },
    execute: async ({ page, part }) => {
      await jitter(6);
      return { page, part, text: `page ${page} part ${part}` };
    },
  };
  const transfer: Tool<{ amount: number }> = {
    description: "moves money",
    requiresApproval: true,
    execute: async ({ amount }) => {
      await jitter(6);
      return { moved: amount };
    },
  };
  const sum: Tool<{ a: number; b: number }> = { description: "adds", execute: ({ a, b }) => ({ sum: a + b }) };
  return agentLoop$({
    id: "jit",
    model: scriptedModel(({ turn }) => response(turn)),
    tools: { fetch, transfer, sum },
    // The approval callback answers at its own pace too.
    approve: async () => {
      await jitter(4);
      return true;
    },
  });
}

async function journalOf(streamed: boolean): Promise<JournalEntry[]> {
  const journal = jsonJournal();
  const loop = jitteredLoop();
  if (streamed) {
    const stream = loop.stream({ runId: "r", input: "go", journal });
    for await (const _ of stream);
    await stream.output;
  } else {
    await loop.run({ runId: "r", input: "go", journal });
  }
  return readJournal(journal, "r");
}

/** For each turn: the positions of its calls' starts and of their results, in the journal. */
function startsAndResults(entries: readonly JournalEntry[], turn: number) {
  const started = new Set<string>();
  const starts: number[] = [];
  const results: number[] = [];
  entries.forEach((e, at) => {
    const data = e.data as { frameId?: string; stepId?: string; decisionId?: string };
    const id = data.frameId ?? data.stepId ?? data.decisionId ?? "";
    if (!id.startsWith(`jit#turn:${turn}:tool:`)) return;
    const step = id.replace(/:(approval|outcome|wait)$/, "");
    if (started.has(step)) results.push(at);
    else {
      starts.push(at);
      if (e.type === "frame.started" || e.type === "call.settled") started.add(step);
    }
  });
  return { starts, results };
}

describe("the calls of one response in the journal", () => {
  it(`journal their starts in call order, before any result: ${RUNS} runs (run and stream) journal the same entries`, async () => {
    const first = await journalOf(false);
    for (let turn = 0; turn < TURNS; turn++) {
      const { starts, results } = startsAndResults(first, turn);
      expect(starts.length).toBe(6 + 1); // five frames and a refusal, and the approval's decision
      expect(Math.max(...starts)).toBeLessThan(Math.min(...results));
      const startIds = starts.map((at) => {
        const data = first[at]?.data as { frameId?: string; stepId?: string; decisionId?: string };
        return data.frameId ?? data.stepId ?? data.decisionId;
      });
      expect(startIds).toEqual(
        [0, 1, 2, 3, 3, 4, 5].map((j, k) => `jit#turn:${turn}:tool:${j}${k === 3 ? ":approval" : ""}`),
      );
    }
    const expected = journalText(first);
    for (let run = 1; run < RUNS; run++) {
      expect(journalText(await journalOf(run % 2 === 1)), `run ${run}`).toEqual(expected);
    }
  });
});

describe("CallOrder", () => {
  it("lets each call go once every call before it passed, and a batch run once all of it passed", async () => {
    const order = new CallOrder(0);
    const went: string[] = [];
    expect(order.turnOf(0)).toBeUndefined(); // the first call goes at once
    const third = order.turnOf(2)?.then(() => went.push("2"));
    const second = order.turnOf(1)?.then(() => went.push("1"));
    const batch = order.allBefore(3)?.then(() => went.push("batch"));
    order.pass(0);
    await second;
    expect(went).toEqual(["1"]);
    order.pass(1);
    await third;
    expect(went).toEqual(["1", "2"]);
    order.pass(2);
    await batch;
    expect(went).toEqual(["1", "2", "batch"]);
    expect(order.allBefore(3)).toBeUndefined();
  });

  it("a call that passes ahead of its turn is counted once the calls before it pass; passing twice changes nothing", async () => {
    const order = new CallOrder(0);
    order.pass(2);
    order.pass(2);
    expect(order.turnOf(3)).toBeInstanceOf(Promise);
    order.pass(0);
    order.pass(1);
    expect(order.turnOf(3)).toBeUndefined();
    expect(order.allBefore(3)).toBeUndefined();
  });
});

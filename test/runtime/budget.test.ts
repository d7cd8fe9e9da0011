import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { budgetBreach, remainingBudget } from "../../src/policies/budget.ts";
import { summarize } from "../../src/policies/context.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { type AgentInterruptedError, isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";
import { jsonJournal } from "../support/loop.ts";

const add: Tool = { description: "adds", execute: (input) => (input as { a: number }).a + 1 };

/** A model that calls `add` on turns 0..calls-1 (each using 100 input and 10 output tokens), then answers. */
function counting(calls: number, id = "m-1") {
  const model = scriptedModel(({ turn }): ModelResponse => {
    const usage = { inputTokens: 100 * (turn + 1), outputTokens: 10 };
    if (turn < calls) return { toolCalls: [{ id: `c${turn}`, name: "add", input: { a: turn } }], usage };
    return { content: "done", toolCalls: [], usage };
  });
  return Object.assign(model, { id });
}

async function interrupted(p: Promise<unknown>): Promise<AgentInterruptedError> {
  const e = await p.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!isAgentInterruptedError(e)) throw new Error(`expected an interruption, got ${String(e)}`);
  return e;
}

describe("budgets: a pure decision before each model call", () => {
  it("budgetBreach names the first limit reached, remainingBudget what is left", () => {
    const used = { modelCalls: 2, inputTokens: 500, outputTokens: 20, cost: 0.1 };
    expect(budgetBreach(used, undefined)).toBeUndefined();
    expect(budgetBreach(used, { modelCalls: 3, inputTokens: 501 })).toBeUndefined();
    expect(budgetBreach(used, { inputTokens: 500, cost: 0.05 })?.limit).toBe("inputTokens");
    expect(budgetBreach(used, { cost: 0.1 })).toEqual({ limit: "cost", used, limits: { cost: 0.1 } });
    expect(remainingBudget({ modelCalls: 5, cost: 0.05 }, used)).toEqual({ modelCalls: 3, cost: 0 });
  });
});

describe("budgets on a run", () => {
  it("a token budget stops the run before the call that would pass it, journaled with the figures, and a raise resumes it", async () => {
    const journal = jsonJournal();
    const model = counting(5);
    const loop = agentLoop$({ id: "b", model, tools: { add } });
    // Input tokens after calls 0,1,2: 100, 300, 600. A limit of 600 lets three calls run and stops the fourth.
    const e = await interrupted(loop.run({ runId: "r", journal, input: "go", budget: { inputTokens: 600 } }));
    expect(model.calls).toBe(3);
    expect(e.run.reason).toBe("budget");
    expect(e.run.iterations).toBe(3);
    const last = (await readJournal(journal, "r")).at(-1);
    expect(last?.type).toBe("run.interrupted");
    expect(last?.data).toMatchObject({
      reason: "budget",
      detail: {
        limit: "inputTokens",
        used: { modelCalls: 3, inputTokens: 600, outputTokens: 30, cost: 0 },
        limits: { inputTokens: 600 },
      },
    });
    // The same budget again: stopped at the same call, no model call made.
    await interrupted(loop.run({ runId: "r", journal, budget: { inputTokens: 600 } }));
    expect(model.calls).toBe(3);
    // Raised: the run goes on from the fourth call; the recorded calls are served.
    const out = await loop.run({ runId: "r", journal, budget: { inputTokens: 10_000 } });
    expect(out.content).toBe("done");
    expect(out.iterations).toBe(6);
    expect(model.calls).toBe(6);
  });

  it("a cost budget counts the price table's price of the model, and the loop's budget holds when the run gives none", async () => {
    const journal = jsonJournal();
    const model = counting(5, "priced");
    // 1 per million input tokens, 100 per million output: call i costs (100(i+1) + 1000) / 1e6.
    const prices = { priced: { inputPerMillion: 1, outputPerMillion: 100 } };
    // After calls 0,1: 0.0011 + 0.0012 = 0.0023; after call 2: 0.0036. A limit of 0.003 stops the fourth call.
    const loop = agentLoop$({ id: "c", model, tools: { add }, budget: { cost: 0.003, prices } });
    const e = await interrupted(loop.run({ runId: "r", journal, input: "go" }));
    expect(model.calls).toBe(3);
    expect(e.run.reason).toBe("budget");
    const detail = (await readJournal(journal, "r")).at(-1)?.data as {
      detail: { limit: string; used: { cost: number } };
    };
    expect(detail.detail.limit).toBe("cost");
    expect(detail.detail.used.cost).toBeCloseTo(0.0036, 10);
    // A model with no price costs nothing: the same limit does not stop it.
    const unpriced = agentLoop$({
      id: "c",
      model: counting(5, "other"),
      tools: { add },
      budget: { cost: 0.003, prices },
    });
    expect((await unpriced.run({ runId: "u", journal, input: "go" })).content).toBe("done");
    // Raised by the run's own budget: resumed to the end.
    const out = await loop.run({ runId: "r", journal, budget: { cost: 1, prices } });
    expect(out.content).toBe("done");
    expect(model.calls).toBe(6);
  });

  it("a model-call budget stops at the call past it", async () => {
    const journal = jsonJournal();
    const model = counting(5);
    const loop = agentLoop$({ id: "m", model, tools: { add } });
    const e = await interrupted(loop.run({ runId: "r", journal, input: "go", budget: { modelCalls: 2 } }));
    expect(model.calls).toBe(2);
    expect(e.run.reason).toBe("budget");
  });

  it("without a budget the journal is the same as before (no entry added)", async () => {
    const a = jsonJournal();
    const b = jsonJournal();
    const prices = { "m-1": { inputPerMillion: 1, outputPerMillion: 1 } };
    await agentLoop$({ id: "n", model: counting(2), tools: { add } }).run({ runId: "r", journal: a, input: "go" });
    await agentLoop$({ id: "n", model: counting(2), tools: { add } }).run({
      runId: "r",
      journal: b,
      input: "go",
      budget: { modelCalls: 100, prices },
    });
    const types = async (j: typeof a) => (await readJournal(j, "r")).map((e) => e.type);
    // The priced run journals its model id once (a parent's budget reads it); nothing else differs.
    const withBudget = await readJournal(b, "r");
    expect(withBudget.filter((e) => e.type === "decision.recorded").map((e) => e.data)).toEqual([
      { decisionId: "n#model", source: "budget-model", choice: { modelId: "m-1" } },
    ]);
    expect((await types(a)).length).toBe(withBudget.length - 1);
  });
});

describe("budgets and a context policy's model calls", () => {
  it("counts a summary's calls and tokens, journaled with the decision, the same after a resume", async () => {
    const journal = jsonJournal();
    let summaries = 0;
    const model = scriptedModel(({ messages }): ModelResponse => {
      if (messages[0]?.role === "system" && messages[0].content.startsWith("Summarize")) {
        summaries++;
        return { content: "so far", toolCalls: [], usage: { inputTokens: 1_000, outputTokens: 50 } };
      }
      const last = messages.at(-1);
      const turn = last?.role === "tool" ? (last.output as number) : 0;
      return {
        toolCalls: [{ id: `c${turn}`, name: "add", input: { a: turn } }],
        usage: { inputTokens: 10, outputTokens: 1 },
      };
    });
    let failed = false;
    const flaky = {
      ...model,
      // Call 3's first attempt fails and is tried again: its decision (and the summary in it) is read twice.
      async generate(request: Parameters<typeof model.generate>[0]) {
        const last = request.messages.at(-1);
        if (!failed && request.tools.length > 0 && last?.role === "tool" && last.output === 3) {
          failed = true;
          throw Object.assign(new Error("busy"), { status: 503 });
        }
        return model.generate(request);
      },
      stream: undefined,
    };
    const loop = agentLoop$({
      id: "s",
      model: flaky,
      tools: { add },
      context: summarize({ keepTurns: 1, every: 2 }),
      retry: { model: { initialDelayMs: 1, maxDelayMs: 1 } },
    });
    // Calls 0-2 (30 tokens); before call 3, the summary (1,000), then call 3 (10): 1,040 ≥ 1,000 stops call 4.
    const e = await interrupted(loop.run({ runId: "r", journal, input: "go", budget: { inputTokens: 1_000 } }));
    expect(e.run.reason).toBe("budget");
    expect(failed).toBe(true);
    expect(summaries).toBe(1);
    const used = async () =>
      ((await readJournal(journal, "r")).at(-1)?.data as { detail?: { used?: unknown } } | undefined)?.detail?.used;
    const first = await used();
    expect(first).toEqual({ modelCalls: 5, inputTokens: 1_040, outputTokens: 54, cost: 0 });
    // Resumed with the same budget: the summary is served, counted again from its decision, not asked again.
    await interrupted(loop.run({ runId: "r", journal, budget: { inputTokens: 1_000 } }));
    expect(await used()).toEqual(first);
    expect(summaries).toBe(1);
  });
});

describe("budgets and sub-agents", () => {
  /** A parent whose model asks its `helper` sub-agent `asks` times, then answers. */
  function family(asks: number) {
    const childModel = Object.assign(
      scriptedModel(({ turn }) =>
        turn === 0
          ? { toolCalls: [{ id: "k", name: "add", input: { a: 1 } }], usage: { inputTokens: 1000, outputTokens: 1 } }
          : { content: "child done", toolCalls: [], usage: { inputTokens: 1000, outputTokens: 1 } },
      ),
      { id: "child-model" },
    );
    const child = agentLoop$({ id: "child", model: childModel, tools: { add } });
    const parentModel = Object.assign(
      scriptedModel(({ turn }): ModelResponse => {
        const usage = { inputTokens: 10, outputTokens: 1 };
        if (turn < asks) return { toolCalls: [{ id: `p${turn}`, name: "helper", input: { prompt: "x" } }], usage };
        return { content: "parent done", toolCalls: [], usage };
      }),
      { id: "parent-model" },
    );
    const parent = agentLoop$({
      id: "parent",
      model: parentModel,
      tools: { helper: agentTool(child, { description: "helps" }) },
    });
    return { parent, childModel, parentModel };
  }

  it("counts a sub-agent's usage toward the parent's budget", async () => {
    const journal = jsonJournal();
    const { parent, childModel, parentModel } = family(3);
    // Each helper call costs 2 child model calls and 2,000 input tokens; the parent's own calls 10 each.
    const e = await interrupted(parent.run({ runId: "p", journal, input: "go", budget: { inputTokens: 2_500 } }));
    expect(e.run.reason).toBe("budget");
    // Parent call 0 (10), child (2,000), parent call 1 (10): 2,020; the child of call 1 is given 480
    // (it runs one call of 1,000 and stops), so the parent stops before its third call.
    expect(parentModel.calls).toBe(2);
    expect(childModel.calls).toBe(3);
    const detail = (await readJournal(journal, "p")).at(-1)?.data as { detail: { used: Record<string, number> } };
    expect(detail.detail.used).toMatchObject({ modelCalls: 5, inputTokens: 3_020 });
  });

  it("a child run gets what is left of the parent's budget", async () => {
    const journal = jsonJournal();
    const { parent } = family(1);
    await interrupted(parent.run({ runId: "p", journal, input: "go", budget: { modelCalls: 2 } }));
    // The parent made 1 call, so the child may make 1: it stops with budget, and the parent stops too.
    const childEnd = (await readJournal(journal, "p/parent#turn:0:tool:0")).at(-1);
    expect(childEnd?.data).toMatchObject({
      reason: "budget",
      detail: { limit: "modelCalls", limits: { modelCalls: 1 } },
    });
  });
});

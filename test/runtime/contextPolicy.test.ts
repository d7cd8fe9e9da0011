import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/core/digest.ts";
import { contextDecisionId, modelFrameId } from "../../src/events/ids.ts";
import { readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { Message, ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { applyContext, type ContextPolicy, recentTurns, summarize } from "../../src/policies/context.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { foldRun, verifyTurnResults } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

/** Tokens of a prompt, estimated as its JSON text's length / 4 (what the bench counts too). */
const tokens = (messages: readonly Message[]) => Math.ceil(JSON.stringify(messages).length / 4);
const SUMMARY_ASK = "Summarize";

/**
 * A scripted run of `turns` turns: each model call asks `fetch` for a page of ~400 characters, then
 * answers. Every prompt the model is sent (its digest and estimated tokens) is recorded by turn.
 */
function longRun(turns: number, context?: ContextPolicy, abortAt?: { turn: number; controller: AbortController }) {
  const prompts = new Map<number, { digest: string; tokens: number }>();
  let summaries = 0;
  const model = scriptedModel(({ messages }): ModelResponse => {
    const first = messages[0];
    if (first?.role === "system" && first.content.startsWith(SUMMARY_ASK)) {
      summaries++;
      return { content: `summary of ${tokens(messages)} tokens`, toolCalls: [] };
    }
    // The turn from the last page fed back (a trimmed prompt no longer has every assistant message).
    const last = messages.at(-1);
    const turn = last?.role === "tool" ? (last.output as { page: number }).page + 1 : 0;
    prompts.set(turn, { digest: sha256Hex(JSON.stringify(messages)), tokens: tokens(messages) });
    if (turn < turns - 1) return { toolCalls: [{ id: `c${turn}`, name: "fetch", input: { page: turn } }] };
    return { content: "read them all", toolCalls: [] };
  });
  const fetch: Tool = {
    description: "fetches a page",
    execute: (input) => {
      const { page } = input as { page: number };
      if (abortAt && page === abortAt.turn) abortAt.controller.abort();
      return { page, text: `page ${page} `.repeat(40) };
    },
  };
  const loop = agentLoop$({
    id: "reader",
    model,
    tools: { fetch },
    maxIterations: turns + 1,
    ...(context ? { context } : {}),
  });
  return { loop, prompts, summaries: () => summaries };
}

const frameDigests = async (journal: Journal, runId: string) =>
  (await readJournal(journal, runId))
    .filter((e) => e.type === "frame.started" && (e.data as { effect: string }).effect === "model")
    .map((e) => (e.data as { inputDigest: string }).inputDigest);

describe("context policy: recentTurns on a 2,000-turn run", () => {
  it("keeps every prompt under a bound, and a resumed run sends the identical prompts", {
    timeout: 120_000,
  }, async () => {
    const TURNS = 2_000;
    const whole = longRun(TURNS, recentTurns(10));
    const journal = jsonJournal();
    await whole.loop.run({ runId: "r", journal, input: "read every page" });
    const most = Math.max(...[...whole.prompts.values()].map((p) => p.tokens));
    // 10 turns kept whole and 10 as references: about 2.5k tokens, whatever the length of the run.
    expect(most).toBeLessThan(4_000);
    expect(whole.prompts.get(TURNS - 1)?.tokens).toBeLessThan(4_000);

    // The same run stopped at turn 1,000 and resumed in a new loop: the same prompts, the same digests.
    const controller = new AbortController();
    const first = longRun(TURNS, recentTurns(10), { turn: 1_000, controller });
    const resumedJournal = jsonJournal();
    const stopped = await first.loop
      .run({ runId: "r", journal: resumedJournal, input: "read every page", signal: controller.signal })
      .catch((e: unknown) => e);
    expect(isAgentInterruptedError(stopped)).toBe(true);
    const second = longRun(TURNS, recentTurns(10));
    await second.loop.run({ runId: "r", journal: resumedJournal });
    const sent = new Map([...first.prompts, ...second.prompts]);
    expect(second.prompts.has(999)).toBe(false); // recorded calls are served, not sent again
    for (let turn = 0; turn < TURNS; turn++) expect(sent.get(turn)?.digest).toBe(whole.prompts.get(turn)?.digest);
    expect(await frameDigests(resumedJournal, "r")).toEqual(await frameDigests(journal, "r"));

    // The decision is journaled once per model call, and what was fed back still verifies against the digests.
    const state = await foldRun(journal, "r");
    expect(state.decisions[contextDecisionId("reader", 1_500)]?.choice).toMatchObject({ omittedTurns: 1_480 });
    expect(await verifyTurnResults(journal, state, 1_500)).toBe(modelFrameId("reader", 1_501));
  });

  it("with no policy, nothing is journaled for it and the prompt is the whole conversation", async () => {
    const off = longRun(30);
    const journal = jsonJournal();
    await off.loop.run({ runId: "r", journal, input: "read" });
    const entries = await readJournal(journal, "r");
    expect(entries.some((e) => e.type === "decision.recorded")).toBe(false);
    expect(off.prompts.get(29)?.tokens).toBeGreaterThan(off.prompts.get(10)?.tokens ?? Infinity);
    // A policy that keeps everything sends the same prompts (its decisions are journaled; the digests cover them).
    const all = longRun(30, { name: "all", decide: (view) => recentTurns(1_000).decide(view, async () => "") });
    await all.loop.run({ runId: "r", journal: jsonJournal(), input: "read" });
    for (let turn = 0; turn < 30; turn++) expect(all.prompts.get(turn)?.digest).toBe(off.prompts.get(turn)?.digest);
  });
});

describe("context policy: summarize", () => {
  it("asks the model for a summary once per `every` turns, journals it, and a resume never asks again", async () => {
    const TURNS = 60;
    const journal = jsonJournal();
    const whole = longRun(TURNS, summarize({ keepTurns: 5, every: 10 }));
    await whole.loop.run({ runId: "r", journal, input: "read" });
    // Turns out of the kept 5 reach 10, 20, … 50 by turn 55: five summaries.
    expect(whole.summaries()).toBe(5);
    const state = await foldRun(journal, "r");
    expect(state.decisions[contextDecisionId("reader", 40)]?.choice).toMatchObject({ summarizedTurns: 30 });
    expect(Math.max(...[...whole.prompts.values()].map((p) => p.tokens))).toBeLessThan(3_000);

    const controller = new AbortController();
    const first = longRun(TURNS, summarize({ keepTurns: 5, every: 10 }), { turn: 33, controller });
    const other = jsonJournal();
    await first.loop.run({ runId: "r", journal: other, input: "read", signal: controller.signal }).catch(() => {});
    const second = longRun(TURNS, summarize({ keepTurns: 5, every: 10 }));
    await second.loop.run({ runId: "r", journal: other });
    expect(first.summaries() + second.summaries()).toBe(5);
    expect(await frameDigests(other, "r")).toEqual(await frameDigests(journal, "r"));
  });
});

describe("context policy: a model call stopped mid-flight", () => {
  it("is resumed with the decision journaled with its frame.started: the summary is served, not asked again", async () => {
    const journal = jsonJournal();
    const policy = () => summarize({ keepTurns: 5, every: 10 });
    let summaries = 0;
    let hang = true;
    const controller = new AbortController();
    const model = scriptedModel(({ messages, request }): ModelResponse | Promise<ModelResponse> => {
      const first = messages[0];
      if (first?.role === "system" && first.content.startsWith(SUMMARY_ASK)) {
        summaries++;
        return { content: `summary ${summaries}`, toolCalls: [] };
      }
      const last = messages.at(-1);
      const turn = last?.role === "tool" ? (last.output as { page: number }).page + 1 : 0;
      if (turn === 15 && hang) {
        // The first summary was just made for this call; the process stops while the model answers.
        queueMicrotask(() => controller.abort());
        return new Promise((_, reject) =>
          request.signal.addEventListener("abort", () => reject(request.signal.reason)),
        );
      }
      if (turn < 20) return { toolCalls: [{ id: `c${turn}`, name: "fetch", input: { page: turn } }] };
      return { content: "done", toolCalls: [] };
    });
    const fetch: Tool = { description: "fetches", execute: (input) => ({ page: (input as { page: number }).page }) };
    const loop = agentLoop$({ id: "reader", model, tools: { fetch }, context: policy() });
    const stopped = await loop.run({ runId: "r", journal, input: "read", signal: controller.signal }).catch((e) => e);
    expect(isAgentInterruptedError(stopped)).toBe(true);
    const state = await foldRun(journal, "r");
    expect(state.frames[modelFrameId("reader", 15)]?.status).toBe("started");
    expect(state.decisions[contextDecisionId("reader", 15)]?.choice).toMatchObject({ summary: "summary 1" });
    hang = false;
    expect((await loop.run({ runId: "r", journal })).content).toBe("done");
    expect(summaries).toBe(1); // turn 15's summary served on the resume (the next is due at turn 25)
  });
});

describe("applyContext", () => {
  it("replaces older tool outputs by a reference to their step, digest and bytes", () => {
    const messages: Message[] = [
      { role: "user", content: "go" },
      { role: "assistant", toolCalls: [{ id: "a", name: "t", input: {} }] },
      { role: "tool", toolCallId: "a", toolName: "t", output: { big: "x" }, isError: false },
      { role: "assistant", toolCalls: [{ id: "b", name: "t", input: {} }] },
      { role: "tool", toolCallId: "b", toolName: "t", output: 2, isError: false },
    ];
    const prompt = applyContext(messages, [1, 3], "l", { head: 1, from: 1, referenceBefore: 3, omittedTurns: 0 });
    expect(prompt[2]).toMatchObject({ role: "tool", output: { omitted: "l#turn:0:tool:0", bytes: 11 } });
    expect(prompt[4]).toEqual(messages[4]);
  });
});

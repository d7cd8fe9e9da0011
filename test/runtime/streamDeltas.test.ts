import { describe, expect, it } from "vitest";
import {
  agentLoop$,
  createJournal,
  type GenerateRequest,
  type Model,
  type ModelResponse,
  type ModelStreamPart,
  memoryStore,
  type RunEvent,
  readJournal,
  scriptedModel,
} from "../../src/index.ts";
import { journalText } from "../support/journalText.ts";

/**
 * The model's deltas reach whoever watches a run (loop.stream, onEvent) and are never journaled:
 * the text deltas of each call concatenate to the content its model-finished (the journal) holds,
 * a failed attempt's deltas are voided by `reset`, and the journal is the one `run` writes.
 */
const script: ModelResponse[] = [
  { content: "Looking the order up now.", toolCalls: [{ id: "a", name: "lookup", input: { order: 7 } }] },
  { content: "Order 7 ships today, by courier.", toolCalls: [] },
];
const lookup = { description: "looks up", execute: async () => ({ status: "shipped" }) };

const textOf = (events: RunEvent[], stepId: string) =>
  events
    .filter((e): e is Extract<RunEvent, { type: "text-delta" }> => e.type === "text-delta" && e.stepId === stepId)
    .map((e) => e.delta)
    .join("");

describe("model deltas in a run's events", () => {
  it("concatenate to each call's journaled content; a plain run streams too; the journal is run's", async () => {
    const streamedJournal = createJournal({ store: memoryStore() });
    const loop = agentLoop$({ id: "d", model: scriptedModel(script), tools: { lookup } });
    const events: RunEvent[] = [];
    const stream = loop.stream({ runId: "s", input: "where is order 7?", journal: streamedJournal });
    for await (const event of stream) events.push(event);
    await stream.output;
    const finished = events.filter(
      (e): e is Extract<RunEvent, { type: "model-finished" }> => e.type === "model-finished",
    );
    expect(finished).toHaveLength(2);
    for (const f of finished) {
      expect(textOf(events, f.stepId)).toBe(f.content);
      // Every delta of a call comes before the call's model-finished.
      const last = events.findLastIndex((e) => e.type === "text-delta" && e.stepId === f.stepId);
      expect(last).toBeLessThan(events.indexOf(f));
    }
    expect(events.some((e) => e.type === "tool-input-delta")).toBe(true);

    const plainJournal = createJournal({ store: memoryStore() });
    // Nobody watches a plain run: the model is streamed all the same (one rule, issue 36), and
    // the journal is byte for byte the streamed run's.
    const scripted = scriptedModel(script);
    let streams = 0;
    const counting: Model = {
      generate: (r) => scripted.generate(r),
      stream: (r) => {
        streams++;
        return (scripted.stream as NonNullable<Model["stream"]>)(r);
      },
    };
    const plain = agentLoop$({ id: "d", model: counting, tools: { lookup } });
    await plain.run({ runId: "s", input: "where is order 7?", journal: plainJournal });
    expect(journalText(await readJournal(streamedJournal, "s"))).toEqual(
      journalText(await readJournal(plainJournal, "s")),
    );
    expect(streams).toBe(2);
  });

  it("a failed attempt mid-stream: its deltas are voided by reset, and the retry's deltas make the content", async () => {
    let calls = 0;
    const flaky: Model = {
      generate: async () => script[1] as ModelResponse,
      async *stream(request: GenerateRequest): AsyncGenerator<ModelStreamPart> {
        calls++;
        yield { type: "text-delta", delta: "Order 7 " };
        if (calls === 1) throw Object.assign(new Error("connection reset"), { statusCode: 503 });
        yield { type: "text-delta", delta: "ships today, by courier." };
        request.signal.throwIfAborted();
        yield { type: "response", response: script[1] as ModelResponse };
      },
    };
    const loop = agentLoop$({
      id: "d",
      model: flaky,
      retry: { model: { maxAttempts: 2, initialDelayMs: 0, jitter: 0 } },
    });
    const events: RunEvent[] = [];
    const out = await loop.run({
      runId: "f",
      input: "where is order 7?",
      journal: createJournal({ store: memoryStore() }),
      onEvent: (e) => events.push(e),
    });
    expect(out.content).toBe("Order 7 ships today, by courier.");
    const types = events.map((e) => e.type);
    const reset = events.find((e) => e.type === "reset");
    expect(reset).toMatchObject({ stepId: "d#turn:0:model", attempt: 1 });
    // Journaled with the attempt's failure (a reconnecting client gets it too), and told once.
    const retrying = events.find((e) => e.type === "model-retrying");
    expect(reset && "cursor" in reset && retrying && "cursor" in retrying && reset.cursor === retrying.cursor).toBe(
      true,
    );
    expect(types.filter((t) => t === "reset")).toHaveLength(1);
    expect(types.indexOf("reset")).toBe(types.indexOf("model-retrying") - 1);
    expect(types.indexOf("reset")).toBeLessThan(types.indexOf("model-finished"));
    // What a client keeps: the deltas after the last reset of the call.
    const afterReset = events.slice(types.lastIndexOf("reset") + 1);
    expect(textOf(afterReset, "d#turn:0:model")).toBe(out.content);
    expect(events.filter((e) => e.type === "model-retrying")).toHaveLength(1);
  });
});

import { describe, expect, it } from "vitest";
import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { GenerateRequest, Message } from "../../src/models/types.ts";
import { forkRun } from "../../src/runtime/control/operations.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

const signal = new AbortController().signal;
const ask = (messages: readonly Message[]): GenerateRequest => ({ messages, tools: [], signal });
const user = (content: string): Message => ({ role: "user", content });
const assistant = (content: string): Message => ({ role: "assistant", content, toolCalls: [] });
/** The turn as the model's docs define it: the assistant messages of the conversation, counted afresh. */
const assistants = (messages: readonly Message[]) => messages.filter((m) => m.role === "assistant").length;

/** A model that answers with the turn it was given, beside the turn counted afresh. */
function turnsModel() {
  const seen: { turn: number; counted: number }[] = [];
  const model = scriptedModel(({ turn, messages }) => {
    seen.push({ turn, counted: assistants(messages) });
    return { content: String(turn), toolCalls: [] };
  });
  return { model, seen };
}

describe("scriptedModel's turn", () => {
  it("counts the assistant messages of an array that grows from call to call", async () => {
    const { model, seen } = turnsModel();
    const messages: Message[] = [user("hi")];
    for (let i = 0; i < 5; i++) {
      await model.generate(ask(messages));
      messages.push(assistant(`a${i}`), user(`u${i}`));
    }
    expect(seen.map((s) => s.turn)).toEqual([0, 1, 2, 3, 4]);
  });

  it("counts each conversation apart when calls of several arrays interleave", async () => {
    const { model, seen } = turnsModel();
    const one: Message[] = [user("one")];
    const two: Message[] = [user("two"), assistant("x"), user("y")];
    for (let i = 0; i < 3; i++) {
      await model.generate(ask(one));
      await model.generate(ask(two));
      one.push(assistant("a"), user("b"));
      two.push(assistant("a"));
    }
    expect(seen.map((s) => s.turn)).toEqual([0, 1, 1, 2, 2, 3]);
  });

  it("counts again an array that shrank or whose last counted message changed", async () => {
    const { model, seen } = turnsModel();
    const messages: Message[] = [user("hi"), assistant("a"), user("b"), assistant("c")];
    await model.generate(ask(messages)); // 2
    messages.length = 1; // shrank
    await model.generate(ask(messages)); // 0
    messages.push(assistant("d"), assistant("e"));
    await model.generate(ask(messages)); // 2
    messages[2] = user("not an answer"); // the last counted message replaced
    await model.generate(ask(messages)); // 1
    await model.stream?.(ask(messages))[Symbol.asyncIterator]().next(); // streamed calls count alike
    expect(seen.map((s) => s.turn)).toEqual([2, 0, 2, 1, 1]);
    expect(seen.every((s) => s.turn === s.counted)).toBe(true);
  });

  it("gives a loop's resumed and forked runs the turn of the conversation they are sent", async () => {
    const seen: { turn: number; counted: number }[] = [];
    // One model object for every run below, as a test suite or a worker shares it.
    const model = scriptedModel(({ turn, messages }) => {
      seen.push({ turn, counted: assistants(messages) });
      if (turn < 3) return { toolCalls: [{ id: `c${turn}`, name: turn === 1 ? "pay" : "look", input: { n: turn } }] };
      return { content: "done", toolCalls: [] };
    });
    const loop = agentLoop$({
      id: "turns",
      model,
      tools: {
        look: { description: "looks", execute: (input) => ({ saw: input }) },
        pay: { description: "needs a yes", requiresApproval: true, execute: () => ({ paid: true }) },
      },
    });
    const journal = createJournal({ store: memoryStore({ json: true }) });
    await expect(loop.run({ runId: "r", journal, input: "go" })).rejects.toThrow(); // waits for its approval
    const out = await loop.run({ runId: "r", journal, approvals: { "turns#turn:1:tool:0": true } });
    expect(out.iterations).toBe(4);
    await forkRun(journal, "r", { at: "turns#turn:2:model", newRunId: "f" });
    expect((await loop.run({ runId: "f", journal })).content).toBe("done");
    expect(seen.map((s) => s.turn)).toEqual([0, 1, 2, 3, 2, 3]);
    expect(seen.every((s) => s.turn === s.counted)).toBe(true);
  });
});

describe("scriptedModel's text answers", () => {
  it("answers a response written without toolCalls as one with none, and a loop's run ends on it", async () => {
    const model = scriptedModel([{ content: "Hello" }]);
    expect(await model.generate(ask([user("hi")]))).toEqual({ content: "Hello", toolCalls: [] });
    const fromFunction = scriptedModel(() => ({ content: "Hi" }));
    expect((await fromFunction.generate(ask([user("hi")]))).toolCalls).toEqual([]);
    const loop = agentLoop$({ id: "text", model, tools: {} });
    expect(loop.id).toBe("text");
    const journal = createJournal({ store: memoryStore() });
    const out = await loop.run({ runId: "r", input: "hi", journal });
    expect(out.content).toBe("Hello");
    expect(out.iterations).toBe(1);
  });
});

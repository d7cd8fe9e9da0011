import { describe, expect, it } from "vitest";
import { toolStepId } from "../../src/events/ids.ts";
import type { ModelResponse } from "../../src/events/types.ts";
import { assistantMessage, Conversation, chainedPromptDigest } from "../../src/runtime/base/conversation.ts";

const asks: ModelResponse = { content: "Looking.", toolCalls: [{ id: "c0", name: "lookup", input: { order: "7" } }] };
const answers: ModelResponse = { content: "On its way.", toolCalls: [] };

describe("Conversation: one run's messages, turn starts, prompt digest and what each call fed", () => {
  it("chains the prompt digest over the messages added since the last model call", () => {
    const talk = new Conversation("shop");
    talk.start({ system: "Be brief." }, "Where is 7?");
    const first = talk.nextPromptDigest();
    expect(first).toBe(chainedPromptDigest("", talk.messages));
    talk.answered(first, asks);
    talk.feed(toolStepId("shop", 0, 0), { output: { status: "shipped" }, isError: false });
    talk.pushToolResults(0, asks);
    expect(talk.nextPromptDigest()).toBe(chainedPromptDigest(first, talk.messages.slice(2)));
    expect(talk.turnStarts).toEqual([2]);
  });

  it("feeds each turn's results once, in call order, and forgets what was fed once it is in the messages", () => {
    const talk = new Conversation("shop");
    talk.start({}, "Where is 7?");
    talk.answered(talk.nextPromptDigest(), asks);
    const stepId = toolStepId("shop", 0, 0);
    talk.feed(stepId, { output: { status: "shipped" }, isError: false });
    talk.pushToolResults(0, asks);
    talk.pushToolResults(0, asks); // once
    expect(talk.messages.at(-1)).toEqual({
      role: "tool",
      toolCallId: "c0",
      toolName: "lookup",
      output: { status: "shipped" },
      isError: false,
    });
    expect(talk.messages).toHaveLength(3);
    expect(talk.fedFor(stepId)).toBeUndefined();
  });

  it("after a compact resume, reads the messages before its tail once and shifts the tail's turn starts", async () => {
    const talk = new Conversation("shop");
    let reads = 0;
    const before = [{ role: "user" as const, content: "Where is 7?" }];
    talk.resumeAt("digest-of-turn-0", asks, async () => {
      reads++;
      return { messages: [...before], turnStarts: [] };
    });
    expect(talk.atHand()).toBeUndefined();
    talk.answered(talk.nextPromptDigest(), answers);
    const whole = await talk.whole();
    await talk.whole();
    expect(reads).toBe(1);
    expect(whole).toEqual([...before, assistantMessage(asks), assistantMessage(answers)]);
    expect(talk.turnStarts).toEqual([1, 2]);
    expect(talk.atHand()).toBe(whole);
  });
});

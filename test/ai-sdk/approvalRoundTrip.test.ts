/**
 * The AI SDK's approval round trip (`useChat`'s `addToolApprovalResponse`, then the resend) with
 * the approvals beyond yes and no: a `needsApproval` function is the tool's policy, so only the
 * calls it asks about reach the person, and a run-wide approval given on the server covers the rest.
 */
import { readUIMessageStream, tool, type UIMessage, type UIMessageChunk } from "ai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { approvalsIn, type ChatMessage } from "../../examples/use-chat.ts";
import { fromAiSdkTools } from "../../src/ai-sdk/aiSdkTools.ts";
import { toUIMessageStream } from "../../src/ai-sdk/uiMessageStream.ts";
import { type Journal, readJournal, runEventsOf, scriptedModel } from "../../src/index.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

function refundLoop(refunded: number[]) {
  const tools = fromAiSdkTools({
    refund: tool({
      description: "refunds an order",
      inputSchema: z.object({ order: z.string(), euros: z.number() }),
      needsApproval: async ({ euros }) => euros > 20, // small refunds go through
      execute: async ({ order, euros }) => {
        refunded.push(euros);
        return { order, refunded: euros };
      },
    }),
  });
  const model = scriptedModel([
    {
      content: "Refunding.",
      toolCalls: [
        { id: "small", name: "refund", input: { order: "A", euros: 10 } },
        { id: "large", name: "refund", input: { order: "B", euros: 100 } },
      ],
    },
    { content: "Done." },
  ]);
  return agentLoop$({ id: "chat", model, tools });
}

async function messageOf(stream: ReadableStream<UIMessageChunk>, message?: UIMessage): Promise<UIMessage> {
  let last: UIMessage | undefined;
  for await (const m of readUIMessageStream({ stream, ...(message ? { message } : {}) })) last = m;
  if (!last) throw new Error("no message");
  return last;
}

const decisions = async (journal: Journal, runId: string) =>
  (await readJournal(journal, runId)).flatMap((e) =>
    e.type === "decision.recorded" && e.data.source === "approval" ? [e.data.choice as Record<string, unknown>] : [],
  );

describe("useChat's approval round trip with an approval policy", () => {
  it("asks only for the call the needsApproval function asks about, and the answer resumes the run into the same message", async () => {
    const journal = jsonJournal();
    const refunded: number[] = [];
    const loop = refundLoop(refunded);
    const asked = await messageOf(
      toUIMessageStream(
        loop.stream({ runId: "c-1", journal, input: "refund A and B" }),
      ) as ReadableStream<UIMessageChunk>,
    );
    const parts = asked.parts.filter((p) => p.type === "tool-refund") as { state: string; toolCallId: string }[];
    expect(parts.map((p) => [p.toolCallId, p.state])).toEqual([
      ["small", "output-available"], // allowed by the policy: ran
      ["large", "approval-requested"],
    ]);
    expect(refunded).toEqual([10]);

    // addToolApprovalResponse({ id, approved: true }), then the resend of the messages.
    const answered = {
      ...asked,
      parts: asked.parts.map((p) =>
        p.type === "tool-refund" && (p as { state: string }).state === "approval-requested"
          ? { ...p, state: "approval-responded", approval: { ...(p as { approval: object }).approval, approved: true } }
          : p,
      ),
    } as UIMessage;
    const approvals = approvalsIn(answered as unknown as ChatMessage);
    expect(Object.values(approvals)).toEqual([true]);
    const shown = runEventsOf(await readJournal(journal, "c-1"));
    const resumed = loop.stream({ runId: "c-1", journal, approvals });
    const done = await messageOf(
      toUIMessageStream(resumed, { messageId: answered.id, shown }) as ReadableStream<UIMessageChunk>,
      answered,
    );
    expect(done.id).toBe(asked.id);
    const after = done.parts.filter((p) => p.type === "tool-refund") as { state: string }[];
    expect(after.map((p) => p.state)).toEqual(["output-available", "output-available"]);
    expect(refunded).toEqual([10, 100]);
    expect((await decisions(journal, "c-1")).map((d) => d.by ?? "person")).toEqual(["policy", "person"]);
  });
});

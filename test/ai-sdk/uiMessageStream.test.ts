import { readUIMessageStream, type UIMessage, type UIMessageChunk } from "ai";
import { describe, expect, it } from "vitest";
import type { LoomUIMessageChunk } from "../../src/ai-sdk/uiMessageStream.ts";
import { toUIMessageStream, toUIMessageStreamResponse } from "../../src/ai-sdk/uiMessageStream.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { RunEvent } from "../../src/projections/events.ts";
import { streamModelCall } from "../../src/runtime/steps/modelStream.ts";

const runId = "r-1";
const M0 = "m#turn:0:model";
const M1 = "m#turn:1:model";
const T00 = "m#turn:0:tool:0";
const T01 = "m#turn:0:tool:1";

type Without<E> = E extends unknown ? Omit<E, "runId" | "cursor"> : never;

/** Events of run r-1, journaled ones numbered as a journal would. */
function run(...events: Without<RunEvent>[]): RunEvent[] {
  let cursor = 0;
  return events.map((e) =>
    ["text-delta", "reasoning-delta", "tool-input-delta", "reset"].includes(e.type)
      ? ({ ...e, runId } as RunEvent)
      : ({ ...e, runId, cursor: ++cursor } as RunEvent),
  );
}

async function* feed(events: readonly RunEvent[]): AsyncGenerator<RunEvent> {
  for (const e of events) yield e;
}

async function chunksOf(events: readonly RunEvent[]): Promise<LoomUIMessageChunk[]> {
  const out: LoomUIMessageChunk[] = [];
  const reader = toUIMessageStream(feed(events)).getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) out.push(r.value);
  return out;
}

/** The assistant message `useChat` ends with, assembled by the AI SDK's own reader. */
async function messageOf(events: readonly RunEvent[], errors: unknown[] = []): Promise<UIMessage> {
  const stream: ReadableStream<UIMessageChunk> = toUIMessageStream(feed(events)); // the AI SDK's type fits
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({ stream, onError: (e) => errors.push(e) })) last = message;
  if (!last) throw new Error("no message");
  return last;
}

const weatherCall = { id: "c1", name: "weather", input: { city: "Paris" } };

const started: Without<RunEvent> = { type: "run-started", loopId: "m", input: "Weather in Paris?" };
const finished0: Without<RunEvent> = {
  type: "model-finished",
  stepId: M0,
  turn: 0,
  content: "Checking.",
  toolCalls: [weatherCall],
  finishReason: "tool-calls",
};
const toolRan: Without<RunEvent>[] = [
  { type: "tool-started", stepId: T00, toolName: "weather", input: { city: "Paris" } },
  {
    type: "tool-finished",
    stepId: T00,
    toolName: "weather",
    status: "ok",
    digest: "sha256:1",
    bytes: 14,
    output: { celsius: 21 },
  },
];
const finished1: Without<RunEvent> = {
  type: "model-finished",
  stepId: M1,
  turn: 1,
  content: "It is 21 °C.",
  toolCalls: [],
};
const completed: Without<RunEvent> = { type: "run-completed", content: "It is 21 °C.", iterations: 2 };

const streamedRun = run(
  started,
  { type: "model-started", stepId: M0, turn: 0, attempt: 1 },
  { type: "text-delta", stepId: M0, attempt: 1, delta: "Check" },
  { type: "text-delta", stepId: M0, attempt: 1, delta: "ing." },
  { type: "tool-input-delta", stepId: M0, attempt: 1, toolCallId: "c1", toolName: "weather", delta: '{"city":' },
  { type: "tool-input-delta", stepId: M0, attempt: 1, toolCallId: "c1", toolName: "weather", delta: '"Paris"}' },
  finished0,
  ...toolRan,
  { type: "model-started", stepId: M1, turn: 1, attempt: 1 },
  { type: "text-delta", stepId: M1, attempt: 1, delta: "It is " },
  { type: "text-delta", stepId: M1, attempt: 1, delta: "21 °C." },
  finished1,
  completed,
);

const texts = (m: UIMessage) => m.parts.flatMap((p) => (p.type === "text" ? [p.text] : []));

describe("toUIMessageStream", () => {
  it("shows a streamed run as one message: a step per model call, its text once, the tool call and its output", async () => {
    const message = await messageOf(streamedRun);
    expect(message.id).toBe(runId);
    expect(message.parts.map((p) => p.type)).toEqual(["step-start", "text", "tool-weather", "step-start", "text"]);
    expect(texts(message)).toEqual(["Checking.", "It is 21 °C."]);
    expect(message.parts[2]).toMatchObject({
      type: "tool-weather",
      toolCallId: "c1",
      state: "output-available",
      input: { city: "Paris" },
      output: { celsius: 21 },
    });
    const chunks = await chunksOf(streamedRun);
    expect(chunks[0]).toEqual({ type: "start", messageId: runId });
    expect(chunks.at(-1)).toEqual({ type: "finish", finishReason: "stop" });
    expect(chunks.filter((c) => c.type === "text-delta").map((c) => c.type === "text-delta" && c.delta)).toEqual([
      "Check",
      "ing.",
      "It is ",
      "21 °C.",
    ]);
  });

  it("gives the same message from model-finished alone, when no deltas came (another process, a generate-only model)", async () => {
    const journaledOnly = streamedRun.filter((e) => "cursor" in e);
    const fromJournal = await messageOf(journaledOnly);
    const streamed = await messageOf(streamedRun);
    expect(texts(fromJournal)).toEqual(texts(streamed));
    expect(fromJournal.parts.map((p) => p.type)).toEqual(streamed.parts.map((p) => p.type));
    expect(fromJournal.parts[2]).toMatchObject({
      state: "output-available",
      input: { city: "Paris" },
      output: { celsius: 21 },
    });
  });

  it("ignores the deltas of a call it joined midway and shows that call's text once, whole, from model-finished", async () => {
    const joined = streamedRun.slice(3); // after model-started and the first delta of turn 0
    const message = await messageOf(joined);
    expect(texts(message)).toEqual(["Checking.", "It is 21 °C."]);
  });

  it("ends a failed attempt's parts at reset, marks it, and streams the retry in fresh parts", async () => {
    const events = run(
      started,
      { type: "model-started", stepId: M0, turn: 0, attempt: 1 },
      { type: "text-delta", stepId: M0, attempt: 1, delta: "Chec" },
      { type: "tool-input-delta", stepId: M0, attempt: 1, toolCallId: "c0", toolName: "weather", delta: '{"ci' },
      { type: "reset", stepId: M0, attempt: 1 },
      {
        type: "model-retrying",
        stepId: M0,
        attempt: 1,
        error: { name: "AI_APICallError", message: "overloaded", status: 529, retryable: true },
        retryAt: "2026-12-03T12:00:01.000Z",
      },
      { type: "model-started", stepId: M0, turn: 0, attempt: 2 },
      { type: "text-delta", stepId: M0, attempt: 1, delta: "stale" }, // a late delta of the void attempt
      { type: "text-delta", stepId: M0, attempt: 2, delta: "Checking." },
      finished0,
      ...toolRan,
      finished1,
      completed,
    );
    const chunks = await chunksOf(events);
    const reset = chunks.findIndex((c) => c.type === "data-loom-reset");
    expect(chunks.slice(reset - 2, reset + 2)).toEqual([
      { type: "text-end", id: `${M0}:1:text` },
      { type: "tool-input-error", toolCallId: "c0", toolName: "weather", input: '{"ci', errorText: expect.any(String) },
      { type: "data-loom-reset", data: { stepId: M0, attempt: 1 }, transient: true },
      expect.objectContaining({
        type: "data-loom-retrying",
        data: expect.objectContaining({ error: "AI_APICallError (status 529): overloaded" }),
      }),
    ]);
    expect(JSON.stringify(chunks)).not.toContain("stale");
    const message = await messageOf(events);
    // The void attempt's text stays, ended (a UI message stream cannot take text back); the retry's is whole.
    expect(texts(message)).toEqual(["Chec", "Checking.", "It is 21 °C."]);
    expect(message.parts.find((p) => p.type === "tool-weather" && p.toolCallId === "c1")).toMatchObject({
      state: "output-available",
    });
  });

  it("shows a pending approval as a tool approval request, and finishes with tool-calls", async () => {
    const events = run(
      started,
      { type: "model-started", stepId: M0, turn: 0, attempt: 1 },
      { ...finished0, content: undefined, toolCalls: [{ id: "c7", name: "delete_all", input: {} }] },
      { type: "approval-requested", stepId: T00, toolName: "delete_all", input: {}, inputDigest: "sha256:9" },
      { type: "run-interrupted", reason: "approval-pending", detail: { pending: [T00] } },
    );
    const message = await messageOf(events);
    expect(message.parts.at(-1)).toMatchObject({
      type: "tool-delete_all",
      toolCallId: "c7",
      state: "approval-requested",
      approval: { id: `${T00}:approval` },
    });
    expect((await chunksOf(events)).at(-1)).toEqual({ type: "finish", finishReason: "tool-calls" });
  });

  it("shows a declined approval as denied, once, and a refused call as an error", async () => {
    const events = run(
      started,
      {
        ...finished0,
        content: undefined,
        toolCalls: [
          { id: "c7", name: "delete_all", input: {} },
          { id: "c8", name: "lookup", input: { q: 1 } },
        ],
      },
      { type: "approval-requested", stepId: T00, toolName: "delete_all", input: {}, inputDigest: "sha256:9" },
      { type: "approval-decided", stepId: T00, approved: false, by: "ops" },
      { type: "call-settled", stepId: T00, toolName: "delete_all", status: "error", reason: "approval-declined" },
      { type: "call-settled", stepId: T01, toolName: "lookup", status: "error", reason: "unknown-tool" },
      finished1,
      completed,
    );
    const message = await messageOf(events);
    const tools = message.parts.filter((p) => p.type.startsWith("tool-"));
    expect(tools).toMatchObject([
      { type: "tool-delete_all", toolCallId: "c7", state: "output-denied" },
      { type: "tool-lookup", toolCallId: "c8", state: "output-error", errorText: "unknown-tool" },
    ]);
  });

  it("gives a lean tool result as its digest and size, a failed tool as an error, bad JSON as an input error", async () => {
    const events = run(
      started,
      {
        ...finished0,
        toolCalls: [
          weatherCall,
          { id: "c9", name: "weather", input: { __loomInvalidInput: "{city:", error: "Unexpected token" } },
        ],
      },
      { type: "tool-finished", stepId: T00, toolName: "weather", status: "ok", digest: "sha256:1", bytes: 14 },
      { type: "call-settled", stepId: T01, toolName: "weather", status: "error", reason: "invalid-input" },
      { type: "model-started", stepId: M1, turn: 1, attempt: 1 },
      finished1,
      {
        type: "tool-finished",
        stepId: "m#turn:1:tool:0",
        toolName: "weather",
        status: "error",
        digest: null,
        bytes: 20,
        output: { error: "down" },
      },
      completed,
    );
    const message = await messageOf(events);
    const tools = message.parts.filter((p) => p.type === "tool-weather");
    expect(tools).toMatchObject([
      { toolCallId: "c1", state: "output-available", output: { digest: "sha256:1", bytes: 14 } },
      { toolCallId: "c9", state: "output-error", rawInput: "{city:", errorText: "invalid-input" },
      { toolCallId: "m#turn:1:tool:0", state: "output-error", errorText: '{"error":"down"}' },
    ]);
  });

  it("ends a run stopped by a model error with an error chunk, then finish; a cancelled run with abort", async () => {
    const failed = run(started, {
      type: "run-interrupted",
      reason: "model-error",
      detail: null,
      cause: { name: "AI_APICallError", message: "Unauthorized", status: 401, retryable: false },
    });
    const errors: unknown[] = [];
    await messageOf(failed, errors);
    expect(String(errors[0])).toContain(
      "run r-1 stopped (model-error): AI_APICallError (status 401, not retryable): Unauthorized",
    );
    expect((await chunksOf(failed)).map((c) => c.type)).toEqual(["start", "error", "finish"]);
    const cancelled = run(started, { type: "run-cancelled", reason: "user asked" });
    expect((await chunksOf(cancelled)).at(-1)).toEqual({ type: "abort", reason: "user asked" });
  });

  it("sends an error chunk when the events fail, and stops reading them when the client cancels", async () => {
    async function* broken(): AsyncGenerator<RunEvent> {
      yield streamedRun[0]!;
      throw new Error("journal unreadable");
    }
    const reader = toUIMessageStream(broken()).getReader();
    const seen: LoomUIMessageChunk[] = [];
    for (let r = await reader.read(); !r.done; r = await reader.read()) seen.push(r.value);
    expect(seen).toEqual([
      { type: "start", messageId: runId },
      { type: "error", errorText: "journal unreadable" },
    ]);
    let closed = false;
    async function* endless(): AsyncGenerator<RunEvent> {
      try {
        for (;;) yield { type: "text-delta", runId, stepId: M0, attempt: 1, delta: "x" };
      } finally {
        closed = true;
      }
    }
    const stream = toUIMessageStream(endless());
    const r = stream.getReader();
    await r.read();
    await r.cancel();
    expect(closed).toBe(true);
  });
});

describe("toUIMessageStream over a streamed model call", () => {
  it("shows a scripted model's streamed call as its content, once, and its tool call's input", async () => {
    const scripted = {
      content: "Let me look that up for you.",
      toolCalls: [{ id: "c1", name: "weather", input: { city: "Oslo", days: 3 } }],
    };
    const events: RunEvent[] = [
      { type: "run-started", runId, cursor: 1, loopId: "m", input: "Oslo?" },
      { type: "model-started", runId, cursor: 2, stepId: M0, turn: 0, attempt: 1 },
    ];
    const response = await streamModelCall(
      scriptedModel([scripted]),
      { messages: [{ role: "user", content: "Oslo?" }], tools: [], signal: new AbortController().signal },
      { onPart: (part) => events.push({ ...part, runId, stepId: M0, attempt: 1 }) },
    );
    events.push(
      {
        type: "model-finished",
        runId,
        cursor: 3,
        stepId: M0,
        turn: 0,
        content: response.content,
        toolCalls: response.toolCalls,
      },
      { type: "run-interrupted", runId, cursor: 4, reason: "max-iterations", detail: null },
    );
    expect(events.filter((e) => e.type === "text-delta").length).toBeGreaterThan(3);
    const message = await messageOf(events);
    expect(texts(message)).toEqual([scripted.content]);
    expect(message.parts.find((p) => p.type === "tool-weather")).toMatchObject({
      toolCallId: "c1",
      state: "input-available",
      input: { city: "Oslo", days: 3 },
    });
  });
});

describe("toUIMessageStreamResponse", () => {
  it("answers with the UI message stream as server-sent events and the headers useChat expects", async () => {
    const response = toUIMessageStreamResponse(feed(streamedRun), { headers: { "x-run-id": runId } });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    expect(response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
    expect(response.headers.get("x-run-id")).toBe(runId);
    const body = await response.text();
    const frames = body.split("\n\n").filter((f) => f !== "");
    expect(frames.at(-1)).toBe("data: [DONE]");
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.replace(/^data: /, "")));
    expect(chunks).toEqual(await chunksOf(streamedRun));
  });
});

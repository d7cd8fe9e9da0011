import { describe, expect, it } from "vitest";
import { type LoomUIMessageChunk, toUIMessageStream } from "../../src/ai-sdk/uiMessageStream.ts";
import { createJournal, memoryStore } from "../../src/index.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { apiCallError } from "../support/aiSdkResults.ts";

/** A run whose model throws `errors` in turn, then answers; its UI message chunks. */
async function chunksOfRun(errors: Error[]): Promise<LoomUIMessageChunk[]> {
  let calls = 0;
  const loop = agentLoop$({
    id: "ui",
    model: {
      async generate() {
        const error = errors[calls++];
        if (error) throw error;
        return { content: "fine", toolCalls: [] };
      },
    },
    retry: { model: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 2, factor: 1, jitter: 0 } },
  });
  const journal = createJournal({ store: memoryStore({ json: true }) });
  const stream = loop.stream({ runId: "r-1", journal, input: "hi" });
  stream.output.catch(() => {});
  const out: LoomUIMessageChunk[] = [];
  const reader = toUIMessageStream(stream).getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) out.push(r.value);
  return out;
}

const retrying = (chunks: readonly LoomUIMessageChunk[]) => chunks.filter((c) => c.type === "data-loom-retrying");

describe("toUIMessageStream: retrying", () => {
  it("says nothing of retrying for an error that is not retried (a 401): the run ends with the error", async () => {
    const chunks = await chunksOfRun([apiCallError(401)]);
    expect(retrying(chunks)).toEqual([]);
    expect(chunks.find((c) => c.type === "error")).toEqual({
      type: "error",
      errorText: expect.stringContaining("status 401, not retryable"),
    });
    expect(chunks.at(-1)).toEqual({ type: "finish", finishReason: "error" });
  });

  it("says retrying for each attempt that will be retried, with when", async () => {
    const chunks = await chunksOfRun([apiCallError(503), apiCallError(503)]);
    expect(retrying(chunks)).toEqual([
      {
        type: "data-loom-retrying",
        data: {
          stepId: "ui#turn:0:model",
          attempt: 1,
          error: expect.stringContaining("503"),
          retryAt: expect.any(String),
        },
        transient: true,
      },
      expect.objectContaining({ data: expect.objectContaining({ attempt: 2 }) }),
    ]);
    expect(chunks.at(-1)).toEqual({ type: "finish", finishReason: "stop" });
  });

  it("says nothing of retrying for the last attempt a policy allows", async () => {
    const chunks = await chunksOfRun([apiCallError(503), apiCallError(503), apiCallError(503)]);
    expect(retrying(chunks).map((c) => c.type === "data-loom-retrying" && c.data.attempt)).toEqual([1, 2]);
    expect(chunks.at(-1)).toEqual({ type: "finish", finishReason: "error" });
  });
});

/**
 * `toUIMessageStream` and `toUIMessageStreamResponse` (subpath `loom-agent/ai-sdk`): a Loom run
 * as the UI message stream `useChat` reads, for a route handler. Nothing here loads `ai`.
 */
import type { RunEvent } from "../projections/events.ts";
import { type LoomUIMessageChunk, type ToUIMessageStreamOptions, uiMessageChunks } from "./uiMessageChunks.ts";

export type { LoomUIMessageChunk, ToUIMessageStreamOptions } from "./uiMessageChunks.ts";

/**
 * A run's events (from `loop.stream`, `followRun`…) as AI SDK UI message chunks, so `useChat`
 * shows the run as one assistant message: one step per model call; its text (from the deltas
 * when the model streams, else from `model-finished`, never twice) and reasoning; its tool calls
 * (input streaming, then available), their outputs or errors (in lean mode the output is
 * `{ digest, bytes }`); a pending approval as a tool approval request whose `approvalId` is
 * `<stepId>:approval` (answer it with `recordApproval(journal, runId, stepId, …)`); a declined one
 * as denied. The run's end gives `finish` (`stop`; `tool-calls` when it waits for an approval),
 * `error` then `finish` (`error`) when it stopped otherwise, `abort` when it was cancelled or
 * aborted. The stream ends with the events; cancelling it stops reading them. Approval requests
 * and denials are chunks of `ai` 6 (`useChat` of `ai` 5 does not know them).
 *
 * @example
 * ```ts
 * import { readUIMessageStream } from "ai";
 * import { toUIMessageStream } from "loom-agent/ai-sdk";
 *
 * for await (const message of readUIMessageStream({ stream: toUIMessageStream(loop.stream(request)) })) {
 *   render(message.parts);
 * }
 * ```
 */
export function toUIMessageStream(
  events: AsyncIterable<RunEvent>,
  options: ToUIMessageStreamOptions = {},
): ReadableStream<LoomUIMessageChunk> {
  const chunks = uiMessageChunks(events, options);
  return new ReadableStream<LoomUIMessageChunk>(
    {
      async pull(controller) {
        const next = await chunks.next();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      async cancel() {
        await chunks.return(undefined);
      },
    },
    { highWaterMark: 0 }, // read the run only as fast as the client takes it
  );
}

/** The headers of a UI message stream response (those `ai`'s `createUIMessageStreamResponse` sets). */
const UI_MESSAGE_STREAM_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-vercel-ai-ui-message-stream": "v1",
  "x-accel-buffering": "no",
};

/**
 * Options of `toUIMessageStreamResponse`: the stream's, and the response's status and headers.
 *
 * @example
 * toUIMessageStreamResponse(events, { headers: { "x-run-id": runId } });
 */
export interface ToUIMessageStreamResponseOptions extends ToUIMessageStreamOptions {
  readonly status?: number;
  readonly statusText?: string;
  /** Added to (or replacing) the UI message stream headers. */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * A web `Response` whose body is the run's UI message stream as server-sent events (`data: <chunk
 * JSON>` each, then `data: [DONE]`), with the headers `useChat`'s default transport expects: return
 * it from a route handler (Next.js, Hono, any fetch-style server).
 *
 * @example
 * ```ts
 * // app/api/chat/route.ts
 * export async function POST(req: Request) {
 *   const { id, messages } = await req.json();
 *   const input = messages.at(-1).parts.find((p) => p.type === "text").text;
 *   return toUIMessageStreamResponse(loop.stream({ runId: `${id}-${messages.length}`, input, journal }));
 * }
 * ```
 */
export function toUIMessageStreamResponse(
  events: AsyncIterable<RunEvent>,
  options: ToUIMessageStreamResponseOptions = {},
): Response {
  const { status, statusText, headers, ...streamOptions } = options;
  const encoder = new TextEncoder();
  const sse = new TransformStream<LoomUIMessageChunk, Uint8Array>({
    transform(chunk, controller) {
      controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`));
    },
    flush(controller) {
      controller.enqueue(encoder.encode("data: [DONE]\n\n"));
    },
  });
  return new Response(toUIMessageStream(events, streamOptions).pipeThrough(sse), {
    status: status ?? 200,
    ...(statusText === undefined ? {} : { statusText }),
    headers: { ...UI_MESSAGE_STREAM_HEADERS, ...headers },
  });
}

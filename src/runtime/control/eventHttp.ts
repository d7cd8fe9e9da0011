/**
 * Event delivery over HTTP (docs/waits.md): handlers a program mounts so that a webhook (a payment
 * provider's, a form's) delivers the event a tool waits for. `POST <any path>/<token>` with a JSON
 * body: the body is the payload. Each answers with JSON and a status that says what happened.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { isRunBusyError } from "../../core/errors.ts";
import type { Journal } from "../../events/spi.ts";
import { type EventDeliveryRefusal, isEventDeliveryError } from "./errors.ts";
import { type DeliveredEvent, deliverEvent } from "./events.ts";

/** Options of `eventWebhook` and `eventFetchHandler`. */
export interface EventHandlerOptions {
  /** Called after a delivery is journaled (e.g. to resume the run on SQLite); awaited before the answer. */
  readonly onDelivered?: (delivered: DeliveredEvent) => unknown;
  /** The largest body accepted, in bytes (default 1 MiB). */
  readonly maxBytes?: number;
  /** The clock a wait's expiry is judged by (default `Date.now`). */
  readonly now?: () => number;
}

const STATUS: Record<EventDeliveryRefusal, number> = {
  eventUnknownToken: 404,
  eventAlreadyDelivered: 409,
  eventExpired: 410,
  eventPayloadInvalid: 400,
};

interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly retryAfterS?: number;
}

/** The delivery of one request, as status and JSON body: the part both handlers share. */
async function answer(
  journal: Journal,
  method: string,
  path: string,
  body: () => Promise<string | undefined>,
  options: EventHandlerOptions,
): Promise<Answer> {
  if (method !== "POST")
    return { status: 405, body: { error: "methodNotAllowed", message: "POST the event's JSON payload to …/<token>" } };
  const token = tokenOf(path);
  if (token === undefined)
    return {
      status: 404,
      body: {
        error: "eventUnknownToken",
        message:
          "the path's last segment is not URL-encoded, so it holds no token Loom made: POST to …/<token> with the token the tool handed out, URL-encoded",
      },
    };
  const text = await body();
  if (text === undefined) return tooLarge(options);
  let payload: unknown;
  try {
    payload = text.trim() === "" ? null : JSON.parse(text);
  } catch {
    return { status: 400, body: { error: "eventPayloadInvalid", message: "the body is not JSON" } };
  }
  try {
    const delivered = await deliverEvent(journal, token, payload, {
      by: "http",
      ...(options.now === undefined ? {} : { now: options.now }),
    });
    await options.onDelivered?.(delivered);
    return { status: 200, body: { delivered: { runId: delivered.runId, stepId: delivered.stepId } } };
  } catch (e) {
    if (isEventDeliveryError(e)) return { status: STATUS[e.code], body: { error: e.code, message: e.message } };
    if (isRunBusyError(e))
      return {
        status: 503,
        body: { error: e.code, message: e.message },
        retryAfterS: Math.max(1, Math.ceil(e.retryAfterMs / 1000)),
      };
    throw e;
  }
}

/** The token a request's path ends with, or undefined when that segment is not URL-encoded (`%`, `%E0%A4%A`). */
function tokenOf(path: string): string | undefined {
  try {
    return decodeURIComponent(path.split("?")[0]?.split("/").pop() ?? "");
  } catch {
    return undefined;
  }
}

const tooLarge = (options: EventHandlerOptions): Answer => ({
  status: 413,
  body: { error: "payloadTooLarge", message: `at most ${options.maxBytes ?? 1 << 20} bytes` },
});

/** A `content-length` that already says the body is larger than `max` (the body is then not read at all). */
const declaredTooLarge = (length: string | null | undefined, max: number): boolean =>
  length !== null && length !== undefined && /^\d+$/.test(length.trim()) && Number(length) > max;

/**
 * A node:http request handler that delivers events: mount it under a path of your server
 * (`POST /events/<token>`, body: the JSON payload). Answers 200 `{ delivered }`, 404 (unknown,
 * forged or not URL-encoded token), 409 (delivered already), 410 (expired), 400 (not JSON), 413
 * (a body over `maxBytes`: reading stops there and the connection closes after the answer), 503
 * with Retry-After (a process runs the run right now), 405 (not POST). Every refusal is
 * `{ error, message }` and journals nothing.
 *
 * @example
 * const events = eventWebhook(journal, { onDelivered: ({ runId }) => loop.run({ runId, journal }).catch(() => {}) });
 * http.createServer((req, res) => (req.url?.startsWith("/events/") ? events(req, res) : app(req, res))).listen(8080);
 */
export function eventWebhook(
  journal: Journal,
  options: EventHandlerOptions = {},
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const max = options.maxBytes ?? 1 << 20;
  return async (request, response) => {
    // Reading stops at the limit: the rest of the body is never pulled off the connection.
    const read = () =>
      new Promise<string | undefined>((resolve, reject) => {
        if (declaredTooLarge(request.headers["content-length"], max)) return resolve(undefined);
        const chunks: Buffer[] = [];
        let size = 0;
        const onData = (chunk: Buffer) => {
          size += chunk.length;
          if (size <= max) return void chunks.push(chunk);
          request.off("data", onData);
          request.pause();
          resolve(undefined);
        };
        request.on("data", onData);
        request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        request.on("error", reject);
      });
    let out: Answer;
    try {
      out = await answer(journal, request.method ?? "GET", request.url ?? "/", read, options);
    } catch (e) {
      out = { status: 500, body: { error: "internal", message: e instanceof Error ? e.message : String(e) } };
    }
    response.writeHead(out.status, {
      "content-type": "application/json",
      ...(out.retryAfterS === undefined ? {} : { "retry-after": String(out.retryAfterS) }),
      // A body left unread (refused before or while reading it) is not drained: the connection closes after the answer.
      ...(request.complete ? {} : { connection: "close" }),
    });
    response.end(JSON.stringify(out.body));
  };
}

/**
 * A fetch-style handler (`Request` → `Response`: Hono, Deno, Bun, Next.js route handlers) that
 * delivers events, answering as {@link eventWebhook} does. A body over `maxBytes` is cancelled
 * once the limit is passed, not read to its end.
 *
 * @example
 * export const POST = eventFetchHandler(journal); // app/events/[token]/route.ts
 */
export function eventFetchHandler(
  journal: Journal,
  options: EventHandlerOptions = {},
): (request: Request) => Promise<Response> {
  const max = options.maxBytes ?? 1 << 20;
  return async (request) => {
    // Counted while it streams: past the limit the body is cancelled, not read to its end.
    const read = async () => {
      if (declaredTooLarge(request.headers.get("content-length"), max)) {
        request.body?.cancel().catch(() => {});
        return undefined;
      }
      if (request.body === null) return "";
      const reader = request.body.getReader();
      const chunks: Uint8Array[] = [];
      let size = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return Buffer.concat(chunks).toString("utf8");
        size += value.byteLength;
        if (size > max) {
          reader.cancel().catch(() => {});
          return undefined;
        }
        chunks.push(value);
      }
    };
    let out: Answer;
    try {
      out = await answer(journal, request.method, new URL(request.url).pathname, read, options);
    } catch (e) {
      out = { status: 500, body: { error: "internal", message: e instanceof Error ? e.message : String(e) } };
    }
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (out.retryAfterS !== undefined) headers["retry-after"] = String(out.retryAfterS);
    return new Response(JSON.stringify(out.body), { status: out.status, headers });
  };
}

import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import {
  type AgentLoop,
  agentLoop$,
  endsItsEntry,
  followRun,
  type Journal,
  openSqliteJournal,
  type RunEvent,
  scriptedModel,
  type Tool,
} from "loom-agent";
import { chatRoute, sessionChatRoute, sessionHistoryRoute } from "./use-chat.ts";

/**
 * A chat backend on node:http: `POST /runs` starts a run and streams its events as server-sent
 * events; `GET /runs/:id/events` (with `Last-Event-ID`) follows a run from where a client left
 * off, whichever process runs it. Each event's SSE id is its cursor; nothing is stored for the
 * stream: a reconnecting client is served from the journal. `POST /api/chat` is `useChat`'s
 * route (examples/use-chat.ts), running `chatLoop`; `POST /api/session` is its session-backed
 * route (the history from the journal, surviving a restart) and `GET /api/session/:id` the
 * session's history.
 */
export function chatServer(loop: AgentLoop, journal: Journal, chatLoop: AgentLoop = loop): Server {
  const chat = chatRoute(chatLoop, journal);
  const session = sessionChatRoute(chatLoop, journal);
  const history = sessionHistoryRoute(journal);
  return createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const follow = /^\/runs\/([^/]+)\/events$/.exec(url.pathname);
    const sessionOf = /^\/api\/session\/([^/]+)$/.exec(url.pathname);
    if (req.method === "POST" && url.pathname === "/runs") void startRun(loop, journal, req, res);
    else if (req.method === "POST" && url.pathname === "/api/chat") void serveFetch(chat, req, res);
    else if (req.method === "POST" && url.pathname === "/api/session") void serveFetch(session, req, res);
    else if (req.method === "GET" && sessionOf)
      void sendResponse(history(decodeURIComponent(sessionOf[1] as string)), res);
    else if (req.method === "GET" && follow)
      void followEvents(journal, decodeURIComponent(follow[1] as string), req, res);
    else res.writeHead(404).end();
  });
}

/** `POST /runs` with `{ input, runId? }`: the run, streamed as it happens. */
async function startRun(loop: AgentLoop, journal: Journal, req: IncomingMessage, res: ServerResponse) {
  const body = JSON.parse((await readBody(req)) || "{}") as { input?: string; runId?: string };
  const runId = body.runId ?? randomUUID();
  openEventStream(res, runId);
  const stream = loop.stream({ runId, journal, input: body.input ?? "" });
  stream.output.catch(() => {}); // the run goes on if the client leaves; its events say how it ended
  try {
    for await (const event of stream) if (!res.destroyed) res.write(sseFrame(event));
  } catch (e) {
    if (!res.destroyed) res.write(`event: error\ndata: ${JSON.stringify({ message: (e as Error).message })}\n\n`);
  }
  res.end();
}

/** `GET /runs/:id/events`: the run's events after `Last-Event-ID` (or `?after=`), then live ones. */
async function followEvents(journal: Journal, runId: string, req: IncomingMessage, res: ServerResponse) {
  const last = req.headers["last-event-id"] ?? new URL(req.url ?? "/", "http://localhost").searchParams.get("after");
  const after = Number(Array.isArray(last) ? last[0] : (last ?? 0)) || 0;
  const gone = new AbortController();
  res.on("close", () => gone.abort()); // the client left: stop reading the journal for it
  openEventStream(res, runId);
  for await (const event of followRun(journal, runId, { after, signal: gone.signal })) res.write(sseFrame(event));
  res.end();
}

/** A fetch-style handler (`Request` → `Response`) served on node:http. */
async function serveFetch(handler: (req: Request) => Promise<Response>, req: IncomingMessage, res: ServerResponse) {
  const body = await readBody(req);
  const headers = new Headers(Object.entries(req.headers).flatMap(([k, v]) => (typeof v === "string" ? [[k, v]] : [])));
  await sendResponse(handler(new Request(`http://localhost${req.url}`, { method: "POST", headers, body })), res);
}

/** A web `Response` written to node:http. */
async function sendResponse(made: Promise<Response>, res: ServerResponse) {
  const response = await made;
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body) for await (const chunk of response.body) if (!res.destroyed) res.write(chunk);
  res.end();
}

function openEventStream(res: ServerResponse, runId: string) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", "x-run-id": runId });
  res.flushHeaders();
}

/**
 * One event as SSE. The id is the event's cursor; an `approval-requested` event shares its cursor
 * with the `run-interrupted` that follows it, and a journaled `reset` with the `model-started`
 * that follows it, so they carry none: a client's last id is always an entry it has seen every
 * event of. Deltas (no cursor) carry none either.
 */
export function sseFrame(event: RunEvent): string {
  const id = endsItsEntry(event) ? `id: ${event.cursor}\n` : ""; // not when another event of its entry follows
  return `${id}event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (text += chunk));
    req.on("end", () => resolve(text));
    req.on("error", reject);
  });
}

/**
 * Runs of `loop` that a process left unfinished (killed mid-run): resumed from their journal, so
 * their followers see them through. A crashed owner on this host is taken over at once.
 */
export async function resumeUnfinished(loop: AgentLoop, journal: Journal): Promise<void> {
  const ended = new Set(["run.completed", "run.interrupted", "run.failed", "run.cancelled"]);
  for (const run of await journal.store.listRuns()) {
    if (ended.has(run.lastType)) continue;
    const [first] = await journal.store.read(run.runId, { from: 1 });
    const loopId = first?.type === "run.started" ? (first.data as { loopId?: unknown }).loopId : undefined;
    if (loopId === loop.config.id) void loop.run({ runId: run.runId, journal }).catch(() => {}); // another loop's: not ours
  }
}

/**
 * The demo's loop: a scripted model (swap in `fromAiSdk(...)`) that streams its words
 * `deltaDelayMs` apart when watched, and a slow lookup tool.
 */
export function demoLoop(toolDelayMs = 200, deltaDelayMs = 0): AgentLoop {
  const lookup: Tool<{ topic: string }> = {
    description: "looks a topic up",
    execute: async ({ topic }) => {
      await new Promise((r) => setTimeout(r, toolDelayMs));
      return { topic, summary: `notes on ${topic}` };
    },
  };
  const topics = ["tides", "moons", "orbits"];
  const model = scriptedModel(
    [
      ...topics.map((topic, i) => ({
        content: `Looking up ${topic}. `,
        toolCalls: [{ id: `l${i}`, name: "lookup", input: { topic } }],
      })),
      { content: "Tides follow the moon's orbit.", toolCalls: [] },
    ],
    { deltaDelayMs },
  );
  return agentLoop$({ id: "chat", model, tools: { lookup } });
}

/**
 * The `useChat` demo's loop: a scripted model (swap in `fromAiSdk(...)`) that answers from the
 * whole conversation and refunds an order when asked, a call that waits for the user's approval.
 */
export function refundChatLoop(refunded: string[] = []): AgentLoop {
  const refund: Tool<{ order: string }> = {
    description: "refunds an order",
    requiresApproval: true, // the run stops until the user approves in the chat
    execute: async ({ order }) => {
      refunded.push(order);
      return { order, refunded: true };
    },
  };
  const model = scriptedModel(({ messages }) => {
    const last = messages.at(-1);
    if (last?.role === "tool")
      return { content: `Refunded ${(last.output as { order: string }).order}.`, toolCalls: [] };
    const said = messages.flatMap((m) => (m.role === "user" ? [m.content] : []));
    const order = /refund (\S+)/.exec(said.at(-1) ?? "")?.[1];
    if (order) return { content: "Refunding.", toolCalls: [{ id: "refund-1", name: "refund", input: { order } }] };
    return { content: `You said: ${said.join(" / ")}`, toolCalls: [] };
  });
  return agentLoop$({ id: "support-chat", model, tools: { refund } });
}

// node --import tsx examples/chat-server.ts [journal.db] [port] [toolDelayMs] [deltaDelayMs]
if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) {
  const [file = "chat.db", port = "3000", delay = "200", deltaDelay = "0"] = process.argv.slice(2);
  const journal = openSqliteJournal(file);
  const loop = demoLoop(Number(delay), Number(deltaDelay));
  const chatLoop = refundChatLoop();
  await resumeUnfinished(loop, journal);
  await resumeUnfinished(chatLoop, journal);
  const server = chatServer(loop, journal, chatLoop).listen(Number(port), "127.0.0.1", () => {
    const address = server.address();
    console.log(`listening ${typeof address === "object" && address ? address.port : port}`);
  });
}

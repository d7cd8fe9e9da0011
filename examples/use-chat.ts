import { type AgentLoop, type Journal, type Message, readJournal, runEventsOf, sessionHistory } from "loom-agent";
import { toUIMessageStreamResponse } from "loom-agent/ai-sdk";

/** What this route reads of a `useChat` message (`UIMessage` of `ai` 6). */
export interface ChatMessage {
  readonly id: string;
  readonly role: "system" | "user" | "assistant";
  readonly parts: readonly {
    readonly type: string;
    readonly text?: string;
    readonly state?: string;
    readonly approval?: { readonly id: string; readonly approved?: boolean };
  }[];
}

/**
 * A `useChat` route handler (`POST /api/chat`, fetch-style: Next.js, Hono…). Each user message
 * starts one run, `<chat id>-<n>` for the n-th user message, given the whole conversation so far.
 * When the client sends approval answers (`addToolApprovalResponse`, then resent by
 * `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses`), the run that
 * waits for them goes on with them, streamed into the same assistant message: no new run starts.
 */
export function chatRoute(loop: AgentLoop, journal: Journal) {
  return async (req: Request): Promise<Response> => {
    const { id, messages } = (await req.json()) as { id: string; messages: ChatMessage[] };
    const runId = `${id}-${messages.filter((m) => m.role === "user").length}`;
    const last = messages.at(-1);
    const approvals = last?.role === "assistant" ? approvalsIn(last) : {};
    if (last?.role === "assistant" && Object.keys(approvals).length > 0) {
      const shown = runEventsOf(await readJournal(journal, runId)); // what the client has of the run
      const resumed = loop.stream({ runId, journal, approvals });
      return toUIMessageStreamResponse(resumed, { messageId: last.id, shown });
    }
    return toUIMessageStreamResponse(loop.stream({ runId, journal, input: conversationOf(messages) }));
  };
}

/** The conversation as the model's messages: each message's text, in order. */
export function conversationOf(messages: readonly ChatMessage[]): Message[] {
  return messages.flatMap((m): Message[] => {
    const content = m.parts.flatMap((p) => (p.type === "text" && p.text ? [p.text] : [])).join("");
    if (content === "") return [];
    return m.role === "assistant" ? [{ role: "assistant", content, toolCalls: [] }] : [{ role: m.role, content }];
  });
}

/** The answers of an assistant message's answered approvals, by step id (`approvalId` is `<stepId>:approval`). */
export function approvalsIn(message: ChatMessage): Record<string, boolean> {
  const answers: Record<string, boolean> = {};
  for (const part of message.parts) {
    const a = part.approval;
    if (part.state === "approval-responded" && a?.approved !== undefined && a.id.endsWith(":approval"))
      answers[a.id.slice(0, -":approval".length)] = a.approved;
  }
  return answers;
}

/**
 * A `useChat` route backed by a session (`POST /api/session`): the chat's id is the session id,
 * and only the client's last message is read; the history the model gets is the session's, from
 * the journal, so it survives a restart of the server (and a client that lost its state). Each
 * message runs `<chat id>/<n>`; the UI message stream carries `{ sessionId }` as the assistant
 * message's metadata. A message sent while the last one is still answered ends in an error chunk
 * (`SessionBusyError`).
 */
export function sessionChatRoute(loop: AgentLoop, journal: Journal) {
  return async (req: Request): Promise<Response> => {
    const { id, messages } = (await req.json()) as { id: string; messages: ChatMessage[] };
    const [message] = conversationOf(messages.slice(-1));
    if (message === undefined || message.role !== "user") return new Response("no user message", { status: 400 });
    const stream = loop.sendStream({ sessionId: id, journal, message });
    return toUIMessageStreamResponse(stream, { messageMetadata: { sessionId: id } });
  };
}

/** `GET /api/session/<id>`: the session's history (the model's messages), rebuilt from the journal. */
export function sessionHistoryRoute(journal: Journal) {
  return async (sessionId: string): Promise<Response> =>
    Response.json(await sessionHistory(journal, sessionId), { headers: { "cache-control": "no-store" } });
}

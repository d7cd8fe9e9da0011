import { request } from "node:http";
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from "ai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sseFrame } from "../../examples/chat-server.ts";
import { openSqliteJournal, readJournal, runEventsOf } from "../../src/index.ts";
import { foldEntries } from "../../src/journal.ts";
import { tempDir } from "../events/tmp.ts";
import { startWorker, type Worker } from "../support/processes.ts";

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-chat-");
});
afterAll(() => tmp.remove());

interface SseEvent {
  readonly id: string | undefined;
  readonly type: string;
  readonly data: Record<string, unknown>;
}

/**
 * A server-sent-events client over a real socket: calls `onEvent` for each event as it arrives;
 * resolves when the server ends the stream, or when the connection breaks (the server was killed).
 */
function sse(
  port: number,
  method: "GET" | "POST",
  path: string,
  options: { body?: string; lastEventId?: string; onEvent: (e: SseEvent) => void },
): Promise<"ended" | "broken"> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = { accept: "text/event-stream" };
    if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId;
    const req = request({ host: "127.0.0.1", port, method, path, headers }, (res) => {
      let buffer = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        buffer += chunk;
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const field = (name: string) =>
            frame
              .split("\n")
              .find((l) => l.startsWith(`${name}: `))
              ?.slice(name.length + 2);
          options.onEvent({ id: field("id"), type: field("event") ?? "", data: JSON.parse(field("data") ?? "{}") });
        }
      });
      res.on("end", () => resolve("ended"));
      res.on("error", () => resolve("broken"));
      res.on("aborted", () => resolve("broken"));
    });
    req.on("error", () => resolve("broken"));
    req.end(options.body);
  });
}

const server = (file: string): Worker => startWorker("examples/chat-server.ts", [file, "0", "150"]);
const portOf = async (w: Worker) =>
  Number((await w.waitFor((l) => l.startsWith("listening "), "the server")).split(" ")[1]);

/**
 * A client of `first`: POSTs run `runId`, keeping every event and the last SSE id, and kills the
 * server (SIGKILL) once `killWhen` holds for an event; the stream must end broken.
 */
async function killedMidStream(
  first: Worker,
  runId: string,
  killWhen: (e: SseEvent, seen: readonly SseEvent[]) => boolean,
) {
  const seen: SseEvent[] = [];
  let lastId: string | undefined;
  const onEvent = (e: SseEvent) => {
    seen.push(e);
    if (e.id !== undefined) lastId = e.id;
  };
  let killed = false;
  const end = await sse(await portOf(first), "POST", "/runs", {
    body: JSON.stringify({ input: "Tell me about tides", runId }),
    onEvent: (e) => {
      onEvent(e);
      if (!killed && killWhen(e, seen)) {
        killed = true;
        first.child.kill("SIGKILL");
      }
    },
  });
  expect(end).toBe("broken");
  return { seen, onEvent, lastId: () => lastId };
}

describe("examples/chat-server.ts", () => {
  it("a client whose server is killed mid-stream reconnects with its last id to the process that resumed the run, and sees everything once", async () => {
    const file = tmp.file("chat.db");
    const first = server(file);
    let second: Worker | undefined;
    try {
      // Killed while the second lookup runs: its outcome is unknown to the journal.
      const { seen, onEvent, lastId } = await killedMidStream(
        first,
        "chat-1",
        (e, seen) => e.type === "tool-started" && seen.filter((s) => s.type === "tool-started").length === 2,
      );
      expect(await first.exited).toMatchObject({ signal: "SIGKILL" });
      expect(seen.some((e) => e.type === "run-completed")).toBe(false);

      second = server(file); // resumes the unfinished run at start
      const secondEnd = await sse(await portOf(second), "GET", "/runs/chat-1/events", {
        lastEventId: lastId(),
        onEvent,
      });
      expect(secondEnd).toBe("ended");

      // Every journaled event exactly once, in order, as the journal's fold has them.
      const journal = openSqliteJournal(file, { readonly: true });
      const all = runEventsOf(await readJournal(journal, "chat-1"));
      await journal.close();
      // (The model's deltas come too, live only, with no id: every one of them before its call's model-finished.)
      expect(seen.filter((e) => "cursor" in e.data).map((e) => e.data)).toEqual(all);
      expect(seen.some((e) => e.type === "text-delta")).toBe(true);
      const steps = (type: string) => seen.filter((e) => e.type === type).map((e) => e.data.stepId);
      expect(steps("tool-started")).toEqual(["chat#turn:0:tool:0", "chat#turn:1:tool:0", "chat#turn:2:tool:0"]);
      expect(steps("tool-finished")).toEqual(steps("tool-started"));
      const text = seen
        .filter((e) => e.type === "model-finished")
        .map((e) => e.data.content)
        .join("");
      expect(text).toBe("Looking up tides. Looking up moons. Looking up orbits. Tides follow the moon's orbit.");
      expect(seen.at(-1)?.type).toBe("run-completed");
      // The killed lookup ran again in the second process: two frame starts, one tool-started.
      const entries = await (async () => {
        const j = openSqliteJournal(file, { readonly: true });
        try {
          return await readJournal(j, "chat-1");
        } finally {
          await j.close();
        }
      })();
      expect(entries.filter((e) => e.type === "frame.started" && e.data.frameId === "chat#turn:1:tool:0")).toHaveLength(
        2,
      );
    } finally {
      first.child.kill("SIGKILL");
      second?.child.kill("SIGKILL");
    }
  }, 60_000);

  it("a client whose server is killed mid-answer gets, on reconnecting, a reset with an id before the call is asked again: the dead server's deltas are void", async () => {
    const file = tmp.file("chat-reset.db");
    const M1 = "chat#turn:1:model";
    // The model's words 60 ms apart: the server is killed while it streams the second answer.
    const first = startWorker("examples/chat-server.ts", [file, "0", "10", "60"]);
    let second: Worker | undefined;
    try {
      const { seen, onEvent, lastId } = await killedMidStream(
        first,
        "chat-2",
        (_, seen) => seen.filter((s) => s.type === "text-delta" && s.data.stepId === M1).length === 2,
      );
      await first.exited;
      const dead = seen.length;
      expect(seen.some((e) => e.type === "model-finished" && e.data.stepId === M1)).toBe(false);

      second = server(file);
      expect(await sse(await portOf(second), "GET", "/runs/chat-2/events", { lastEventId: lastId(), onEvent })).toBe(
        "ended",
      );
      const reconnected = seen.slice(dead);
      const at = reconnected.findIndex((e) => e.type === "reset");
      expect(reconnected[at]?.data).toMatchObject({ stepId: M1, attempt: 1 });
      // Journaled (a cursor), its SSE id on the model-started of the same entry, which follows it.
      expect(reconnected[at]?.id).toBeUndefined();
      expect(reconnected[at + 1]).toMatchObject({ type: "model-started", id: String(reconnected[at]?.data.cursor) });
      // What the client keeps of the call: the deltas after its last reset, completed by model-finished.
      const last = seen.findLastIndex((e) => e.type === "reset" && e.data.stepId === M1);
      const kept = seen
        .slice(last + 1)
        .filter((e) => e.type === "text-delta" && e.data.stepId === M1)
        .map((e) => e.data.delta)
        .join("");
      const content = seen.find((e) => e.type === "model-finished" && e.data.stepId === M1)?.data.content as string;
      expect(content).toBe("Looking up moons. ");
      expect(content.startsWith(kept)).toBe(true);
      expect(seen.at(-1)?.type).toBe("run-completed");
    } finally {
      first.child.kill("SIGKILL");
      second?.child.kill("SIGKILL");
    }
  }, 60_000);

  it("gives an approval request and a journaled reset no id of their own: a client's last id is an entry it saw all of", () => {
    const base = { runId: "r", cursor: 7 } as const;
    expect(
      sseFrame({ ...base, type: "approval-requested", stepId: "s", toolName: "t", input: {}, inputDigest: null }),
    ).not.toMatch(/^id:/);
    expect(sseFrame({ ...base, type: "run-interrupted", reason: "approval-pending", detail: null })).toMatch(
      /^id: 7\n/,
    );
    expect(sseFrame({ type: "text-delta", runId: "r", stepId: "s", attempt: 1, delta: "x" })).not.toMatch(/^id:/);
    expect(sseFrame({ ...base, type: "reset", stepId: "s", attempt: 1 })).not.toMatch(/^id:/);
  });
});

/** What `useChat`'s default transport does: POSTs `{ id, messages }`, reads the UI message stream into a message. */
async function useChatSend(port: number, id: string, messages: readonly UIMessage[]): Promise<UIMessage> {
  const res = await fetch(`http://127.0.0.1:${port}/api/chat`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ id, messages, trigger: "submit-message" }),
  });
  expect(res.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
  const chunks = (await res.text())
    .split("\n\n")
    .filter((f) => f.startsWith("data: ") && f !== "data: [DONE]")
    .map((f) => JSON.parse(f.slice("data: ".length)) as UIMessageChunk);
  const last = messages.at(-1);
  const stream = new ReadableStream<UIMessageChunk>({
    start(c) {
      for (const chunk of chunks) c.enqueue(chunk);
      c.close();
    },
  });
  // Like useChat: a response to an assistant message (approval answers) goes on with that message.
  let message: UIMessage | undefined;
  for await (const m of readUIMessageStream({
    stream,
    ...(last?.role === "assistant" ? { message: structuredClone(last) } : {}),
  }))
    message = m;
  if (!message) throw new Error("no assistant message");
  return message;
}

const user = (id: string, text: string): UIMessage => ({ id, role: "user", parts: [{ type: "text", text }] });
const textOf = (m: UIMessage) => m.parts.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("");

describe("examples/use-chat.ts on the chat server (useChat's POST /api/chat)", () => {
  it("gives each run the whole conversation, and after an approval resumes the waiting run into the same message", async () => {
    const file = tmp.file("use-chat.db");
    const worker = server(file);
    try {
      const port = await portOf(worker);
      const first = user("u1", "My name is Ana");
      const a1 = await useChatSend(port, "chat-7", [first]);
      expect(textOf(a1)).toBe("You said: My name is Ana");

      const second = user("u2", "refund A-17");
      const a2 = await useChatSend(port, "chat-7", [first, a1, second]);
      const asked = a2.parts.find((p) => p.type === "tool-refund");
      expect(asked).toMatchObject({
        toolCallId: "refund-1",
        state: "approval-requested",
        input: { order: "A-17" },
        approval: { id: "support-chat#turn:0:tool:0:approval" },
      });

      // The second run was given the whole conversation, not only its last message.
      const journal = openSqliteJournal(file, { readonly: true });
      try {
        const started = (await readJournal(journal, "chat-7-2"))[0];
        expect(started?.type === "run.started" && started.data.input).toEqual([
          { role: "user", content: "My name is Ana" },
          { role: "assistant", content: "You said: My name is Ana", toolCalls: [] },
          { role: "user", content: "refund A-17" },
        ]);
      } finally {
        await journal.close();
      }

      // useChat's addToolApprovalResponse, then the automatic resend of the messages.
      const answered: UIMessage = {
        ...a2,
        parts: a2.parts.map((p) =>
          p.type === "tool-refund"
            ? ({
                ...p,
                state: "approval-responded",
                approval: { id: (p as { approval: { id: string } }).approval.id, approved: true },
              } as typeof p)
            : p,
        ),
      };
      const a3 = await useChatSend(port, "chat-7", [first, a1, second, answered]);
      expect(a3.id).toBe(a2.id); // the same assistant message, gone on with
      const tools = a3.parts.filter((p) => p.type === "tool-refund");
      expect(tools).toEqual([
        expect.objectContaining({
          toolCallId: "refund-1",
          state: "output-available",
          output: { order: "A-17", refunded: true },
        }),
      ]);
      expect(textOf(a3)).toBe("Refunding.Refunded A-17.");

      // The waiting run went on; no other run was started.
      const after = openSqliteJournal(file, { readonly: true });
      try {
        expect((await after.store.listRuns()).map((r) => r.runId)).toEqual(["chat-7-1", "chat-7-2"]);
        expect(foldEntries(await readJournal(after, "chat-7-2")).status).toBe("completed");
      } finally {
        await after.close();
      }
    } finally {
      worker.child.kill("SIGKILL");
    }
  }, 60_000);
});

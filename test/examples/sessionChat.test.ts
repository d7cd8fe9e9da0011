import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "../events/tmp.ts";
import { startWorker, type Worker } from "../support/processes.ts";

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-session-chat-");
});
afterAll(() => tmp.remove());

const server = (file: string): Worker => startWorker("examples/chat-server.ts", [file, "0", "0"]);
const portOf = async (w: Worker) =>
  Number((await w.waitFor((l) => l.startsWith("listening "), "the server")).split(" ")[1]);

/** What `useChat` POSTs for one new message: only that message (a client that kept nothing). */
async function say(port: number, sessionId: string, text: string): Promise<Record<string, unknown>[]> {
  const body = { id: sessionId, messages: [{ id: `u-${text}`, role: "user", parts: [{ type: "text", text }] }] };
  const response = await fetch(`http://127.0.0.1:${port}/api/session`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
  return (await response.text())
    .split("\n\n")
    .map((frame) => frame.replace(/^data: /, ""))
    .filter((data) => data !== "" && data !== "[DONE]")
    .map((data) => JSON.parse(data) as Record<string, unknown>);
}

const textOf = (chunks: Record<string, unknown>[]) =>
  chunks
    .filter((c) => c.type === "text-delta")
    .map((c) => c.delta)
    .join("");

describe("examples/chat-server.ts: a useChat route backed by a session", () => {
  it("keeps the conversation in the journal: a restarted server answers the third message on all three", {
    timeout: 60_000,
  }, async () => {
    const file = tmp.file("sessions.db");
    const first = server(file);
    let second: Worker | undefined;
    try {
      const port = await portOf(first);
      const one = await say(port, "s-1", "hello");
      expect(one[0]).toEqual({ type: "start", messageId: "s-1/0", messageMetadata: { sessionId: "s-1" } });
      expect(textOf(one)).toBe("You said: hello");
      expect(textOf(await say(port, "s-1", "how are you"))).toBe("You said: hello / how are you");
      first.child.kill("SIGKILL");
      await first.exited;

      second = server(file);
      const port2 = await portOf(second);
      const three = await say(port2, "s-1", "bye");
      expect(three[0]).toMatchObject({ messageId: "s-1/2", messageMetadata: { sessionId: "s-1" } });
      expect(textOf(three)).toBe("You said: hello / how are you / bye");
      const history = (await (await fetch(`http://127.0.0.1:${port2}/api/session/s-1`)).json()) as { role: string }[];
      expect(history.filter((m) => m.role === "user")).toHaveLength(3);
      expect(history.filter((m) => m.role === "assistant")).toHaveLength(3);
    } finally {
      first.child.kill("SIGKILL");
      second?.child.kill("SIGKILL");
    }
  });
});

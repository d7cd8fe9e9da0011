import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentLoop$, type OpenJournal, openSqliteJournal, scriptedModel } from "../../src/index.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";
import { sessionLoop } from "../fixtures/sessionLoop.ts";

const dir = tempDir("loom-viewer-sessions-");
let journal: OpenJournal;
let viewer: Viewer;

/** Two sessions (`chat-1`: two answered messages and a third stopped by its budget; `<b>`-named one) and a plain run. */
beforeAll(async () => {
  journal = openSqliteJournal(`${dir}/viewer.db`);
  const loop = sessionLoop();
  await loop.send({ sessionId: "chat-1", journal, message: "tides" });
  await loop.send({ sessionId: "chat-1", journal, message: "moons" });
  await loop.send({ sessionId: "chat-1", journal, message: "orbits", budget: { modelCalls: 5 } }).catch(() => {});
  const echo = agentLoop$({
    id: "echo",
    model: scriptedModel([{ content: "<img src=x onerror=alert(2)>", toolCalls: [] }]),
  });
  await echo.send({ sessionId: "<b>x", journal, message: "<script>alert(1)</script>" });
  await loop.run({ runId: "alone", journal, input: "comets" });
  viewer = await startViewer({ journal });
});
afterAll(async () => {
  await viewer?.stop();
  await journal?.close();
});

const get = async (path: string) => {
  const res = await fetch(viewer.url + path);
  return { status: res.status, text: await res.text() };
};
const runsListed = (page: string) => [...page.matchAll(/<tr class="[^"]*" data-run="([^"]+)"/g)].map((m) => m[1]);

describe("the viewer and sessions", () => {
  it("the session page shows each message's text, answer, run and status, and how to resume it", async () => {
    const { status, text } = await get("/sessions/chat-1");
    expect(status).toBe(200);
    expect(text).toContain("<h1>Session chat-1</h1>");
    expect([...text.matchAll(/<li data-run="([^"]+)">/g)].map((m) => m[1])).toEqual([
      "chat-1/0",
      "chat-1/1",
      "chat-1/2",
    ]);
    expect(text).toContain('<p class="said user"><strong>user</strong> tides</p>');
    expect(text).toContain(
      '<p class="said answer"><strong>answer</strong> #1 tides: {&quot;note&quot;:&quot;notes on tides&quot;}</p>',
    );
    expect(text).toContain('<a href="/runs/chat-1%2F2">chat-1/2</a>');
    expect(text).toContain('<span class="status interrupted">interrupted</span>');
    expect(text).toContain(
      "resume the session with <code>resumeSession(loop, { sessionId: &quot;chat-1&quot;, journal })</code>",
    );
  });

  it("escapes a session's id, its messages and its answers", async () => {
    const { status, text } = await get(`/sessions/${encodeURIComponent("<b>x")}`);
    expect(status).toBe(200);
    expect(text).toContain("<h1>Session &lt;b&gt;x</h1>");
    expect(text).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(text).toContain("&lt;img src=x onerror=alert(2)&gt;");
    expect(text).not.toContain("<script>alert");
    expect(text).not.toContain("<img");
    expect(text).not.toContain("<b>x");
  });

  it("answers 404 for a session nothing was sent to", async () => {
    const { status, text } = await get("/sessions/nobody");
    expect(status).toBe(404);
    expect(text).toContain("nothing was sent to session nobody");
  });

  it("the runs page filters by ?session= and names each message's session", async () => {
    const all = await get("/");
    expect(runsListed(all.text)).toEqual(expect.arrayContaining(["chat-1/0", "chat-1/2", "alone", "&lt;b&gt;x/0"]));
    expect(all.text).toContain('of session <a href="/sessions/%3Cb%3Ex">&lt;b&gt;x</a>');
    expect(all.text).toContain(
      '<span class="dim session">message 2 of session <a href="/sessions/chat-1">chat-1</a></span>',
    );
    const one = await get("/?session=chat-1");
    expect(runsListed(one.text).sort()).toEqual(["chat-1/0", "chat-1/1", "chat-1/2"]);
    expect(one.text).toContain('the runs of session <a href="/sessions/chat-1">chat-1</a>');
    // The status filter keeps the session.
    expect(one.text).toContain('href="/?status=completed&amp;session=chat-1"');
    const completed = await get("/?status=completed&session=chat-1");
    expect(runsListed(completed.text).sort()).toEqual(["chat-1/0", "chat-1/1"]);
  });
});

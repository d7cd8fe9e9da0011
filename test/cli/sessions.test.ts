import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runDemoSession } from "../../src/cli/demo/session.ts";
import { packageRoot } from "../../src/cli/packageRoot.ts";
import { openSqliteJournal, readJournal } from "../../src/index.ts";
import { sessionLoop } from "../fixtures/sessionLoop.ts";
import { loom, tempDir } from "./support.ts";

const dir = tempDir("loom-cli-sessions-");
let db = "";

/**
 * A journal with three sessions: `chat-1` (the session tests' loop), its first two messages
 * answered (2 model calls each) and its third stopped by the session's budget after one call; `odd`, one message whose text holds a terminal escape;
 * and `talk` (the demo's loop, which `loom resume` can run), its first message completed and its
 * second cut off mid-tool as a killed process leaves it. Plus a run outside any session.
 */
beforeAll(async () => {
  db = join(dir, "loom.db");
  const journal = openSqliteJournal(db);
  try {
    const loop = sessionLoop();
    await loop.send({ sessionId: "chat-1", journal, message: "tides" });
    await loop.send({ sessionId: "chat-1", journal, message: "moons" });
    await loop.send({ sessionId: "chat-1", journal, message: "orbits", budget: { modelCalls: 5 } }).catch(() => {});
    await loop.send({ sessionId: "odd", journal, message: "red \u001b[31m alert" });
    await loop.run({ runId: "alone", journal, input: "comets" });
    const root = packageRoot();
    await runDemoSession({ journal, runId: "talk/0", root, turns: 3 });
    await runDemoSession({ journal, runId: "full", root, turns: 4 });
    const entries = await readJournal(journal, "full");
    const cut = entries.findIndex((e) => e.type === "frame.started" && e.data.frameId === "loom-demo#turn:2:tool:0");
    await journal.store.append(
      "talk/1",
      entries.slice(0, cut + 1).map(({ type, data }) => ({ type, data }) as never),
      {
        expectedVersion: 0,
      },
    );
  } finally {
    await journal.close();
  }
});

describe("loom show <sessionId>", () => {
  it("shows a session: each message's text, its answer, its run and its status", async () => {
    const { code, stdout, stderr } = await loom(dir, ["show", "chat-1", "--db", db]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const lines = stdout.split("\n");
    expect(lines[0]).toBe("session chat-1");
    expect(lines).toContain("loop    chat");
    expect(stdout).toMatch(/^message 0 {2}chat-1\/0 {2}completed, 2 model calls$/m);
    expect(stdout).toMatch(/^ {2}user {4}tides$/m);
    expect(stdout).toContain('  answer  #1 tides: {"note":"notes on tides"}');
    expect(stdout).toMatch(/^ {2}answer {2}#2 moons: /m);
    // The last message stopped on its budget: its status says so, and how to resume the session.
    expect(stdout).toMatch(/^message 2 {2}chat-1\/2 {2}interrupted, 1 model call; budget: modelCalls 5 of 5 reached/m);
    expect(stdout).toMatch(/^ {2}user {4}orbits$/m);
    expect(stdout).toContain(
      'status  3 messages; the last, chat-1/2: interrupted — resume with resumeSession(loop, { sessionId: "chat-1", journal })',
    );
    expect(stdout).not.toMatch(/answer {2}#3/);
  });

  it("names `loom resume <sessionId>` for a session of a loop the command can resume", async () => {
    const { code, stdout } = await loom(dir, ["show", "talk", "--db", db]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^message 1 {2}talk\/1 {2}stalled, 3 model calls; resume with loom resume 'talk'$/m);
  });

  it("prints the session as JSON with --json", async () => {
    const { code, stdout } = await loom(dir, ["show", "chat-1", "--db", db, "--json"]);
    expect(code).toBe(0);
    const shown = JSON.parse(stdout);
    expect(shown).toMatchObject({ sessionId: "chat-1", lastRunId: "chat-1/2" });
    expect(shown.messages.map((m: { text: string }) => m.text)).toEqual(["tides", "moons", "orbits"]);
    expect(shown.messages.map((m: { status: string }) => m.status)).toEqual(["completed", "completed", "interrupted"]);
    expect(shown.messages[2].answer).toBeUndefined();
    expect(shown.messages[0].run).toMatchObject({ runId: "chat-1/0", loopId: "chat", status: "completed" });
  });

  it("escapes control characters a message's text holds", async () => {
    const { stdout } = await loom(dir, ["show", "odd", "--db", db]);
    expect(stdout).toContain("  user    red \\x1b[31m alert");
    expect(stdout).not.toContain("\u001b");
  });

  it("a message's run names its session in its story", async () => {
    const { code, stdout } = await loom(dir, ["show", "chat-1/1", "--db", db]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^run {5}chat-1\/1$/m);
    expect(stdout).toContain("session chat-1, its message 1: loom show 'chat-1'");
    expect((await loom(dir, ["show", "alone", "--db", db])).stdout).not.toContain("session");
  });

  it("still says what it cannot find for an id that is neither a run, a session nor a step", async () => {
    const { code, stderr } = await loom(dir, ["show", "chat-9", "--db", db]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/chat-9/);
  });
});

describe("loom runs and sessions", () => {
  it("--session lists only that session's runs, in message order", async () => {
    const { code, stdout } = await loom(dir, ["runs", "--session", "chat-1", "--db", db]);
    expect(code).toBe(0);
    const runs = stdout
      .trim()
      .split("\n")
      .slice(1)
      .map((l) => l.split(/\s+/)[0]);
    expect(runs).toEqual(["chat-1/0", "chat-1/1", "chat-1/2"]);
  });

  it("--json marks each message's run with its session and index", async () => {
    const runs = JSON.parse((await loom(dir, ["runs", "--db", db, "--json"])).stdout);
    const byId = new Map(runs.map((r: { runId: string }) => [r.runId, r]));
    expect(byId.get("chat-1/2")).toMatchObject({ session: { sessionId: "chat-1", n: 2 } });
    expect(byId.get("alone")).not.toHaveProperty("session");
    const one = JSON.parse((await loom(dir, ["runs", "--session", "talk", "--db", db, "--json"])).stdout);
    expect(one.map((r: { runId: string }) => r.runId)).toEqual(["talk/0", "talk/1"]);
  });

  it("--sessions lists one row per session: its messages, last message and status", async () => {
    const { code, stdout } = await loom(dir, ["runs", "--sessions", "--db", db]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^session\s+loop\s+messages\s+last message\s+model calls/);
    expect(stdout).toMatch(/^chat-1\s+chat\s+3\s+chat-1\/2 interrupted\s+5\s/m);
    expect(stdout).toMatch(/^talk\s+loom-demo\s+2\s+talk\/1 stalled\s.*resume with loom resume 'talk'$/m);
    expect(stdout).not.toMatch(/^alone/m);
    const sessions = JSON.parse((await loom(dir, ["runs", "--sessions", "--db", db, "--json"])).stdout);
    expect(sessions.map((s: { sessionId: string }) => s.sessionId).sort()).toEqual(["chat-1", "odd", "talk"]);
    expect(sessions.find((s: { sessionId: string }) => s.sessionId === "chat-1")).toMatchObject({
      messages: 3,
      lastRunId: "chat-1/2",
      activity: "interrupted",
    });
  });

  it("--session of a session not in the journal is an error that names it", async () => {
    const { code, stderr } = await loom(dir, ["runs", "--session", "nope", "--db", db]);
    expect(code).toBe(1);
    expect(stderr).toContain('no session "nope"');
  });
});

describe("loom resume <sessionId>", () => {
  it("resumes the session's last message's run", { timeout: 30_000 }, async () => {
    const { code, stdout, stderr } = await loom(dir, ["resume", "talk", "--db", db]);
    expect(stderr).toContain("session talk: resuming its last message's run, talk/1");
    expect(code).toBe(0);
    expect(stdout).toMatch(/^run talk\/1 completed: this resume ran/m);
    const after = await loom(dir, ["show", "talk", "--db", db]);
    expect(after.stdout).toMatch(/^message 1 {2}talk\/1 {2}completed/m);
  });
});

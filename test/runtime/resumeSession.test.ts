import { describe, expect, it } from "vitest";
import {
  isAgentInterruptedError,
  isUnknownSessionError,
  readJournal,
  resumeSession,
  sessionHistory,
} from "../../src/index.ts";
import { sessionLoop } from "../fixtures/sessionLoop.ts";
import { jsonJournal } from "../support/loop.ts";

describe("resumeSession: a session resumed by its id", () => {
  it("resumes the run of the session's last message where its budget stopped it", async () => {
    const journal = jsonJournal();
    const loop = sessionLoop();
    await loop.send({ sessionId: "chat-1", journal, message: "tides" });
    const stopped = await loop
      .send({ sessionId: "chat-1", journal, message: "moons", budget: { modelCalls: 1 } })
      .catch((e: unknown) => e);
    expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("budget");
    const before = (await readJournal(journal, "chat-1/1")).length;

    const reply = await resumeSession(loop, { sessionId: "chat-1", journal });
    expect(reply.runId).toBe("chat-1/1");
    expect(reply.content).toBe('#2 moons: {"note":"notes on moons"}');
    // The stopped run went on: its entries grew; no run was started for the session.
    expect((await readJournal(journal, "chat-1/1")).length).toBeGreaterThan(before);
    expect((await readJournal(journal, "chat-1/2")).length).toBe(0);
    expect((await sessionHistory(journal, "chat-1")).filter((m) => m.role === "user")).toHaveLength(2);
    // The session takes its next message.
    expect((await loop.send({ sessionId: "chat-1", journal, message: "orbits" })).runId).toBe("chat-1/2");
  });

  it("gives a completed last message's answer from the journal, without calling the model again", async () => {
    const journal = jsonJournal();
    const loop = sessionLoop();
    await loop.send({ sessionId: "done", journal, message: "tides" });
    const entries = (await readJournal(journal, "done/0")).length;
    const reply = await resumeSession(loop, { sessionId: "done", journal });
    expect(reply).toMatchObject({ runId: "done/0", content: '#1 tides: {"note":"notes on tides"}' });
    expect((await readJournal(journal, "done/0")).length).toBe(entries);
  });

  it("refuses a session nothing was sent to with UnknownSessionError, naming it", async () => {
    const journal = jsonJournal();
    const error = await resumeSession(sessionLoop(), { sessionId: "nobody", journal }).catch((e: unknown) => e);
    expect(isUnknownSessionError(error)).toBe(true);
    expect(error).toMatchObject({ code: "unknownSession", sessionId: "nobody" });
    expect((error as Error).message).toContain("loop.send");
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { Message, RunStartedData } from "../../src/events/types.ts";
import {
  isAgentInterruptedError,
  isSessionBusyError,
  openSqliteJournal,
  runConversation,
  sessionHistory,
  sessionRuns,
} from "../../src/index.ts";
import { nextSessionTurn } from "../../src/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { recentTurns } from "../../src/policies/context.ts";
import { foldRun } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";
import { sessionLoop } from "../fixtures/sessionLoop.ts";
import { jsonJournal } from "../support/loop.ts";
import { startWorker } from "../support/processes.ts";

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-sessions-");
});
afterAll(() => tmp.remove());

const MESSAGES = ["tides", "moons", "orbits"];

describe("sessions: a conversation of many runs", () => {
  it("runs message n as <sessionId>/<n> on the history of the ones before", async () => {
    const journal = jsonJournal();
    const loop = sessionLoop();
    const replies = [];
    for (const message of MESSAGES) replies.push(await loop.send({ sessionId: "s", journal, message }));
    expect(replies.map((r) => r.runId)).toEqual(["s/0", "s/1", "s/2"]);
    expect(replies.map((r) => r.content)).toEqual([
      '#1 tides: {"note":"notes on tides"}',
      '#2 moons: {"note":"notes on moons"}',
      '#3 orbits: {"note":"notes on orbits"}',
    ]);
    expect(await sessionRuns(journal, "s")).toEqual(["s/0", "s/1", "s/2"]);
    const history = await sessionHistory(journal, "s");
    // Three messages, each: the user's, the tool call, its result, the answer. No system prompt.
    expect(history).toHaveLength(12);
    expect(history.filter((m) => m.role === "user").map((m) => (m as { content: string }).content)).toEqual(MESSAGES);
    expect(history.some((m) => m.role === "system")).toBe(false);
    // Run 2 started with the history of run 1 and its message: it journals the message and names
    // that history (run 1, its last seq, 8 messages), so the history is a projection of the runs.
    const started = (await readJournal(journal, "s/2"))[0]?.data as RunStartedData;
    expect(started.input).toEqual([{ role: "user", content: "orbits" }]);
    expect(started.continues).toMatchObject({
      runId: "s/1",
      seq: (await foldRun(journal, "s/1")).version,
      messages: 8,
    });
    expect(JSON.stringify((await runConversation(journal, "s/2")).slice(0, 9))).toBe(
      JSON.stringify([...(await runConversation(journal, "s/1")), { role: "user", content: "orbits" }]),
    );
  });

  it("refuses a concurrent send, and a send while the last message's run has not completed", async () => {
    const journal = jsonJournal();
    const loop = sessionLoop();
    const first = loop.send({ sessionId: "b", journal, message: "tides" });
    const second = await loop.send({ sessionId: "b", journal, message: "moons" }).catch((e: unknown) => e);
    expect(isSessionBusyError(second)).toBe(true);
    await first;
    // The next message's run stops on its budget: the session waits for it.
    const stopped = await loop
      .send({ sessionId: "b", journal, message: "moons", budget: { modelCalls: 1 } })
      .catch((e: unknown) => e);
    expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("budget");
    const busy = await loop.send({ sessionId: "b", journal, message: "orbits" }).catch((e: unknown) => e);
    expect(isSessionBusyError(busy) && busy.runId).toBe("b/1");
    expect((await sessionRuns(journal, "b")).length).toBe(2); // nothing journaled for the refused send
    await expect(nextSessionTurn(journal, "b", "orbits")).rejects.toMatchObject({ code: "sessionBusy" });
    // Resumed with a budget raised, the run completes and the session takes the next message.
    await loop.run({ runId: "b/1", journal });
    expect((await loop.send({ sessionId: "b", journal, message: "orbits" })).runId).toBe("b/2");
    expect((await sessionHistory(journal, "b")).filter((m) => m.role === "user")).toHaveLength(3);
  });

  it("refuses one of two sends racing from two loop objects for the same message run", async () => {
    const journal = jsonJournal();
    const results = await Promise.allSettled([
      sessionLoop().send({ sessionId: "race", journal, message: "tides" }),
      sessionLoop().send({ sessionId: "race", journal, message: "moons" }),
    ]);
    const refused = results.filter((r) => r.status === "rejected").map((r) => (r as PromiseRejectedResult).reason);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(refused.map((e) => isSessionBusyError(e) && e.runId)).toEqual(["race/0"]);
    expect(await sessionRuns(journal, "race")).toEqual(["race/0"]);
  });

  it("a context policy with userMessages keeps a long session's prompt to its last messages; the history keeps all", async () => {
    const journal = jsonJournal();
    const prompts: Message[][] = [];
    const model = scriptedModel(({ messages }) => {
      prompts.push([...messages]);
      const last = messages.at(-1) as { content: string };
      return { content: `re: ${last.content}`, toolCalls: [] };
    });
    const loop = agentLoop$({ id: "c", model, system: "Be brief.", context: recentTurns(4, { userMessages: 2 }) });
    for (let i = 0; i < 6; i++) await loop.send({ sessionId: "long", journal, message: `m${i}` });
    expect(prompts.at(-1)).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "(8 earlier messages of this conversation are left out.)" },
      { role: "user", content: "m4" },
      { role: "assistant", content: "re: m4", toolCalls: [] },
      { role: "user", content: "m5" },
    ]);
    expect((await sessionHistory(journal, "long")).filter((m) => m.role === "user")).toHaveLength(6);
    // The decision, journaled with the run, names the part of the input left out.
    const state = await foldRun(journal, "long/5");
    expect(state.decisions["c#turn:0:context"]?.choice).toMatchObject({ omittedInput: [1, 9] });
  });

  it("streams a message's run with sendStream", async () => {
    const journal = jsonJournal();
    const stream = sessionLoop().sendStream({ sessionId: "st", journal, message: "tides" });
    const types: string[] = [];
    for await (const event of stream) {
      types.push(event.type);
      expect(event.runId).toBe("st/0");
    }
    expect(types.at(-1)).toBe("run-completed");
    expect((await stream.output).content).toContain("tides");
  });

  it("a 3-message session across two processes has the history of an uninterrupted one, byte for byte", {
    timeout: 60_000,
  }, async () => {
    const db = tmp.file("session.db");
    const script = "test/fixtures/sessionProcess.ts";
    const first = startWorker(script, [db, "chat-1", "tides", "moons"]);
    const firstDone = await first.waitFor((l) => l.startsWith("["), "the first process's history");
    expect((await first.exited).code, first.stderr()).toBe(0);
    expect(JSON.parse(firstDone).filter((m: { role: string }) => m.role === "user")).toHaveLength(2);
    const second = startWorker(script, [db, "chat-1", "orbits"]);
    const secondDone = await second.waitFor((l) => l.startsWith("["), "the second process's history");
    expect((await second.exited).code, second.stderr()).toBe(0);
    expect(second.lines).toContain("sent chat-1/2");

    const uninterrupted = jsonJournal();
    const loop = sessionLoop();
    for (const message of MESSAGES) await loop.send({ sessionId: "chat-1", journal: uninterrupted, message });
    const expected = JSON.stringify(await sessionHistory(uninterrupted, "chat-1"));
    expect(secondDone).toBe(expected);
    // Rebuilt from the SQLite journal here: the same bytes again.
    const journal = openSqliteJournal(db);
    try {
      expect(JSON.stringify(await sessionHistory(journal, "chat-1"))).toBe(expected);
    } finally {
      await journal.store.close();
    }
  });
});

import { describe, expect, it } from "vitest";
import { isRunCancelledError } from "../../src/core/errors.ts";
import { readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { redaction, withRedaction } from "../../src/events/redaction/redact.ts";
import type { Message } from "../../src/events/types.ts";
import {
  isAgentInterruptedError,
  isSessionBusyError,
  runConversation,
  sessionHistory,
  sessionRuns,
} from "../../src/index.ts";
import { isRedactedHistoryError, nextSessionTurn } from "../../src/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { cancelRun } from "../../src/runtime/control/operations.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { sessionLoop } from "../fixtures/sessionLoop.ts";
import { crashingStore, jsonJournal } from "../support/loop.ts";

/**
 * A session goes on after a message whose run ended without completing: cancelled, failed, or
 * never resumable because its journal was redacted. A run that still holds the session (stalled,
 * stopped) is named for what it is, with what to do.
 */

const rejection = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e,
  );

const text = (m: Message) => `${m.role}:${"content" in m ? (m.content ?? "") : ""}`;

/**
 * A chat loop: "hold" calls a tool that runs until its signal aborts, "refund" a tool that needs an
 * approval (the loop's approve hook is broken: the run fails), anything else is answered at once.
 */
function chatLoop() {
  let holding: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    holding = resolve;
  });
  const hold: Tool = {
    description: "runs until stopped",
    execute: (_input, { signal }) =>
      new Promise((_, reject) => {
        holding();
        signal.addEventListener("abort", () => reject(signal.reason));
      }),
  };
  const refund: Tool = { description: "refunds", requiresApproval: true, execute: () => "refunded" };
  const model = scriptedModel(({ messages }) => {
    const last = messages.at(-1) as Message;
    if (last.role === "user" && (last.content === "hold" || last.content === "refund"))
      return { toolCalls: [{ id: "c", name: last.content, input: {} }] };
    return { content: `re: ${last.role === "user" ? last.content : "tool"}`, toolCalls: [] };
  });
  const loop = agentLoop$({
    id: "chat",
    model,
    tools: { hold, refund },
    approve: () => {
      throw new TypeError("approve hook is broken");
    },
  });
  return { loop, held };
}

describe("a session after a message that ended without completing", () => {
  it("takes the next message after a cancelled one, from the history as it stands", async () => {
    const journal = jsonJournal();
    const { loop, held } = chatLoop();
    await loop.send({ sessionId: "c", journal, message: "hello" });
    const cancelled = rejection(loop.send({ sessionId: "c", journal, message: "hold", ownership: { leaseMs: 300 } }));
    await held;
    expect((await cancelRun(journal, "c/1", { reason: "user pressed stop", waitMs: 5_000 })).status).toBe("cancelled");
    expect(isRunCancelledError(await cancelled)).toBe(true);

    const reply = await loop.send({ sessionId: "c", journal, message: "and now?" });
    expect(reply).toMatchObject({ runId: "c/2", content: "re: and now?" });
    // The cancelled message is in the history; its call cut off without a result is not.
    const started = (await readJournal(journal, "c/2"))[0]?.data as unknown as { input: Message[] };
    expect(started.input.map(text)).toEqual(["user:and now?"]);
    expect((await runConversation(journal, "c/2")).slice(0, 4).map(text)).toEqual([
      "user:hello",
      "assistant:re: hello",
      "user:hold",
      "user:and now?",
    ]);
    expect((await sessionHistory(journal, "c")).map(text)).toEqual([
      "user:hello",
      "assistant:re: hello",
      "user:hold",
      "user:and now?",
      "assistant:re: and now?",
    ]);
  });

  it("takes the next message after a failed one", async () => {
    const journal = jsonJournal();
    const { loop } = chatLoop();
    const failed = await rejection(loop.send({ sessionId: "f", journal, message: "refund" }));
    expect((failed as Error).message).toBe("approve hook is broken");
    expect((await readJournal(journal, "f/0")).at(-1)?.type).toBe("run.failed");

    const reply = await loop.send({ sessionId: "f", journal, message: "never mind" });
    expect(reply).toMatchObject({ runId: "f/1", content: "re: never mind" });
    expect((await sessionHistory(journal, "f")).map(text)).toEqual([
      "user:refund",
      "user:never mind",
      "assistant:re: never mind",
    ]);
  });

  it("takes the next message after one whose run cannot be resumed because its journal was redacted", async () => {
    const journal = withRedaction(jsonJournal(), redaction({ paths: ["$..note"] }));
    const loop = sessionLoop();
    await loop.send({ sessionId: "r", journal, message: "tides" });
    // A budget sent with a message holds for the session: "tides" made two model calls, so three
    // stops "moons" after its lookup, before its answer.
    const stopped = await rejection(
      loop.send({ sessionId: "r", journal, message: "moons", budget: { modelCalls: 3 } }),
    );
    expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("budget");
    expect(isRedactedHistoryError(await rejection(loop.run({ runId: "r/1", journal })))).toBe(true);

    const reply = await loop.send({ sessionId: "r", journal, message: "orbits" });
    expect(reply).toMatchObject({ runId: "r/2", content: '#3 orbits: {"note":"notes on orbits"}' });
    // The history as the journal holds it: the stopped message's lookup, redacted, is in it.
    const history = await sessionHistory(journal, "r");
    expect(history.filter((m) => m.role === "user").map(text)).toEqual(["user:tides", "user:moons", "user:orbits"]);
    expect(
      history.filter((m) => m.role === "tool").map((m) => JSON.stringify((m as { output: unknown }).output)),
    ).toEqual(['{"note":"[redacted]"}', '{"note":"[redacted]"}', '{"note":"[redacted]"}']);
  });
});

describe("a session held by its last message", () => {
  it("says a stalled run stalled, and to resume or cancel it; once cancelled, the session goes on", async () => {
    const store = memoryStore({ json: true });
    const loop = sessionLoop();
    await loop.send({ sessionId: "s", journal: jsonJournal(store), message: "tides" });
    // The process of the next message dies after its first entries: nobody runs it now.
    const crashing = jsonJournal(crashingStore(store, 2));
    await expect(loop.send({ sessionId: "s", journal: crashing, message: "moons" })).rejects.toThrow(/simulated crash/);
    const journal = jsonJournal(store);

    const busy = await rejection(loop.send({ sessionId: "s", journal, message: "orbits" }));
    expect(isSessionBusyError(busy) && busy.runId).toBe("s/1");
    expect((busy as Error).message).toContain("s/1, stalled: its process stopped before the run ended");
    expect((busy as Error).message).toContain('Resume it with loop.run({ runId: "s/1", journal })');
    expect((busy as Error).message).not.toContain("is running");
    expect(await sessionRuns(journal, "s")).toEqual(["s/0", "s/1"]);

    expect((await cancelRun(journal, "s/1", { reason: "gave up on it" })).status).toBe("cancelled");
    const turn = await nextSessionTurn(journal, "s", "orbits");
    expect(turn.runId).toBe("s/2");
    expect(turn.input.filter((m) => m.role === "user").map(text)).toEqual(["user:tides", "user:moons", "user:orbits"]);
  });

  it("says a run stopped for its budget waits to be resumed", async () => {
    const journal = jsonJournal();
    const loop = sessionLoop();
    await rejection(loop.send({ sessionId: "b", journal, message: "tides", budget: { modelCalls: 1 } }));
    const busy = await rejection(loop.send({ sessionId: "b", journal, message: "moons" }));
    expect((busy as Error).message).toContain("b/0, stopped (budget) and waits to be resumed");
  });
});

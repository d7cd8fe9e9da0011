import { MockLanguageModelV3 } from "ai/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AnyActorRef, InspectionEvent } from "xstate";
import { fromAiSdk } from "../../src/ai-sdk/aiSdk.ts";
import { isAgentLoopConfigError } from "../../src/core/errors.ts";
import { createJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { EntryOf, EntryType } from "../../src/events/types.ts";
import type { Model, ModelResponse } from "../../src/models/types.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";
import { textResult as answer, apiCallError as apiError } from "../support/aiSdkResults.ts";

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-retry-");
});
afterAll(() => tmp.remove());

/** An AI SDK model that throws `failures` in turn, then answers; counts its calls. */
function flakyAiSdk(failures: (() => unknown)[]) {
  let calls = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      const fail = failures[calls++];
      if (fail) throw fail();
      return answer("done");
    },
  });
  return { model: fromAiSdk(model), calls: () => calls };
}

const attempts = (entries: readonly { type: string }[]) =>
  entries.filter((e): e is EntryOf<"attempt.failed"> => e.type === "attempt.failed");

/** The frames that completed as failed (status error). */
const failedFrames = (entries: readonly EntryOf<EntryType>[]) =>
  entries.flatMap((e) => (e.type === "frame.completed" && e.data.failed ? [e.data.frameId] : []));

const memoryJournal = () => createJournal({ store: memoryStore({ json: true }) });

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error("expected the run to stop");
    },
    (e: unknown) => e,
  );
}

describe("model retries", () => {
  it("a model failing 429 twice with Retry-After: 1 is called 3 times, ≥ 1 s apart, and its 2 failures journaled", async () => {
    const rateLimited = () => apiError(429, { "retry-after": "1" });
    const { model, calls } = flakyAiSdk([rateLimited, rateLimited]);
    const journal = memoryJournal();
    const states: string[] = [];
    const inspect = (e: InspectionEvent) => {
      if (e.type === "@xstate.snapshot") {
        states.push(JSON.stringify((e.snapshot as { value?: unknown }).value));
      }
    };
    const started = performance.now();
    const out = await agentLoop$({ id: "m", model }).run({ runId: "r", journal, input: "hi", inspect });
    const waited = performance.now() - started;
    expect(out.content).toBe("done");
    expect(calls()).toBe(3);
    expect(waited).toBeGreaterThanOrEqual(2 * 1000 - 50); // two waits of at least the server's second
    const entries = await readJournal(journal, "r");
    const failed = attempts(entries);
    expect(failed.map((e) => e.data.attempt)).toEqual([1, 2]);
    for (const e of failed) {
      expect(e.data.frameId).toBe("m#turn:0:model");
      expect(e.data.error).toMatchObject({ name: "AI_APICallError", status: 429, retryable: true, retryAfterMs: 1000 });
      // retryAt is taken when the attempt failed, meta.at when its entry was written, later on a
      // loaded machine: the wait it names is the server's second, give or take that delay.
      expect(e.data.retryAt).toBeGreaterThanOrEqual(Date.parse(e.meta.at) + 1000 - 250);
    }
    // Each attempt is its own fenced frame.started (write-ahead), and the chart waited in backingOff.
    expect(entries.filter((e) => e.type === "frame.started")).toHaveLength(3);
    expect(states).toContain(JSON.stringify({ running: "backingOff" }));
  }, 10_000);

  it("a 401 is not retried: one call, one attempt entry with no retryAt, the run interrupted with its cause", async () => {
    const { model, calls } = flakyAiSdk([() => apiError(401)]);
    const journal = memoryJournal();
    const e = await rejection(agentLoop$({ id: "m", model }).run({ runId: "r", journal, input: "hi" }));
    if (!isAgentInterruptedError(e)) throw e;
    expect(calls()).toBe(1);
    expect(e.run.reason).toBe("model-error");
    expect(e.cause).toEqual({ name: "AI_APICallError", message: "status 401", status: 401, retryable: false });
    const failed = attempts(await readJournal(journal, "r"));
    expect(failed.map((a) => [a.data.attempt, a.data.retryAt])).toEqual([[1, null]]);
  });

  it("out of attempts: interrupts model-error with the last cause; a resume gets the policy's attempts again", async () => {
    const unavailable = () => apiError(503);
    const { model, calls } = flakyAiSdk([unavailable, unavailable, unavailable]);
    const loop = agentLoop$({ id: "m", model, retry: { model: { maxAttempts: 2, initialDelayMs: 10 } } });
    const journal = memoryJournal();
    const e = await rejection(loop.run({ runId: "r", journal, input: "hi" }));
    if (!isAgentInterruptedError(e)) throw e;
    expect(calls()).toBe(2);
    expect(e.cause).toMatchObject({ status: 503, retryable: true });
    // The third call fails, the fourth answers: the count goes on (3, 4) but the budget is fresh.
    const out = await loop.run({ runId: "r", journal });
    expect(out.content).toBe("done");
    expect(calls()).toBe(4);
    expect(attempts(await readJournal(journal, "r")).map((a) => [a.data.attempt, a.data.retryAt === null])).toEqual([
      [1, false],
      [2, true],
      [3, false],
    ]);
  });

  it("an abort during the back-off, then a resume on the reopened SQLite journal: the count continues, only the remaining wait is waited", async () => {
    const path = tmp.file("backoff.db");
    const rateLimited = () => apiError(429, { "retry-after": "2" });
    const first = flakyAiSdk([rateLimited]);
    const controller = new AbortController();
    let journal = openSqliteJournal(path);
    const running = agentLoop$({ id: "m", model: first.model }).run({
      runId: "r",
      journal,
      input: "hi",
      signal: controller.signal,
    });
    // Abort once the failure is journaled, while the chart waits.
    for (let i = 0; i < 200 && attempts(await readJournal(journal, "r")).length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const abortedAt = Date.now();
    controller.abort();
    const e = await rejection(running);
    if (!isAgentInterruptedError(e)) throw e;
    expect(e.run.reason).toBe("aborted");
    await journal.close();
    await new Promise((r) => setTimeout(r, 500)); // part of the 2 s passes while nothing runs

    // A fresh loop and a reopened journal: the second attempt fails again, the third answers.
    journal = openSqliteJournal(path);
    const second = flakyAiSdk([() => apiError(503)]);
    const loop = agentLoop$({ id: "m", model: second.model, retry: { model: { initialDelayMs: 10, jitter: 0 } } });
    const resumedAt = Date.now();
    const out = await loop.run({ runId: "r", journal });
    const waited = Date.now() - resumedAt;
    expect(out.content).toBe("done");
    expect(second.calls()).toBe(2);
    const failed = attempts(await readJournal(journal, "r"));
    expect(failed.map((a) => a.data.attempt)).toEqual([1, 2]);
    const retryAt = failed[0]?.data.retryAt as number;
    // Waited what remained of the journaled wait (loosely: not the whole 2 s again, not nothing).
    expect(waited).toBeGreaterThanOrEqual(retryAt - resumedAt - 50);
    expect(waited).toBeLessThan(2000 - (resumedAt - abortedAt) + 1000);
    await journal.close();
  }, 15_000);

  it("a model that never answers is aborted after modelAttemptMs, journaled as a retryable TimeoutError, and retried", async () => {
    let calls = 0;
    const signals: AbortSignal[] = [];
    const model: Model = {
      generate: ({ signal }) => {
        calls++;
        if (calls === 1) {
          if (signal) signals.push(signal);
          return new Promise<ModelResponse>(() => {}); // never settles, ignores its signal
        }
        return Promise.resolve({ content: "late but fine", toolCalls: [] });
      },
    };
    const journal = memoryJournal();
    const loop = agentLoop$({
      id: "m",
      model,
      timeouts: { modelAttemptMs: 100 },
      retry: { model: { initialDelayMs: 10 } },
    });
    const out = await loop.run({ runId: "r", journal, input: "hi" });
    expect(out.content).toBe("late but fine");
    expect(calls).toBe(2);
    expect(signals[0]?.aborted).toBe(true);
    const [failed] = attempts(await readJournal(journal, "r"));
    expect(failed?.data.error).toEqual({
      name: "TimeoutError",
      message: "model call m#turn:0:model did not answer within 100 ms",
      retryable: true,
    });
  });
});

describe("tool retries and timeouts", () => {
  const flakyTool = (failures: number, retry?: Tool["retry"]) => {
    const seen: string[] = [];
    const tool: Tool = {
      description: "flaky",
      execute: (_input, { stepId }) => {
        seen.push(stepId);
        if (seen.length <= failures) throw new Error(`flake ${seen.length}`);
        return { ok: seen.length };
      },
      ...(retry ? { retry } : {}),
    };
    return { tool, seen };
  };

  const callsThenAnswers = (name: string): Model => {
    let turn = 0;
    return {
      generate: async ({ messages }) => {
        turn++;
        if (turn === 1) return { toolCalls: [{ id: "c1", name, input: {} }] };
        const result = messages.find((m) => m.role === "tool");
        return { content: JSON.stringify(result?.role === "tool" ? result.output : null), toolCalls: [] };
      },
    };
  };

  it("a flaky tool is retried by its own policy with the same step id; each failure journaled, each attempt write-ahead", async () => {
    const { tool, seen } = flakyTool(2, { maxAttempts: 3, initialDelayMs: 20 });
    const journal = memoryJournal();
    const out = await agentLoop$({ id: "m", model: callsThenAnswers("flaky"), tools: { flaky: tool } }).run({
      runId: "r",
      journal,
      input: "go",
    });
    expect(JSON.parse(out.content)).toEqual({ ok: 3 });
    expect(seen).toEqual(Array(3).fill("m#turn:0:tool:0"));
    const entries = await readJournal(journal, "r");
    expect(attempts(entries).map((a) => [a.data.frameId, a.data.attempt, a.data.error.message])).toEqual([
      ["m#turn:0:tool:0", 1, "flake 1"],
      ["m#turn:0:tool:0", 2, "flake 2"],
    ]);
    const toolStarts = entries.filter((e) => e.type === "frame.started" && e.data.frameId === "m#turn:0:tool:0");
    expect(toolStarts).toHaveLength(3);
    expect(out.toolCallLog[0]).toMatchObject({ toolOutput: { ok: 3 } });
  });

  it("retry.tools applies to tools without their own; out of attempts the last error is fed back to the model", async () => {
    const { tool, seen } = flakyTool(5);
    const journal = memoryJournal();
    const loop = agentLoop$({
      id: "m",
      model: callsThenAnswers("flaky"),
      tools: { flaky: tool },
      retry: { tools: { maxAttempts: 2, initialDelayMs: 5 } },
    });
    const out = await loop.run({ runId: "r", journal, input: "go" });
    expect(seen).toHaveLength(2);
    expect(JSON.parse(out.content)).toEqual({ error: "Error", message: "flake 2" });
    expect(failedFrames(await readJournal(journal, "r"))).toEqual(["m#turn:0:tool:0"]);
    const failed = attempts(await readJournal(journal, "r"));
    expect(failed.map((a) => [a.data.attempt, a.data.retryAt === null])).toEqual([
      [1, false],
      [2, true],
    ]);
  });

  it("without a policy a throwing tool runs once and its failure is journaled as before (no attempt entry)", async () => {
    const { tool, seen } = flakyTool(1);
    const journal = memoryJournal();
    const out = await agentLoop$({ id: "m", model: callsThenAnswers("flaky"), tools: { flaky: tool } }).run({
      runId: "r",
      journal,
      input: "go",
    });
    expect(seen).toHaveLength(1);
    expect(JSON.parse(out.content)).toEqual({ error: "Error", message: "flake 1" });
    expect(attempts(await readJournal(journal, "r"))).toEqual([]);
  });

  it("an abort during a tool's back-off, then a resume: the same step goes on at attempt 2 after the remaining wait", async () => {
    const seen: string[] = [];
    let failNext = true;
    const tool: Tool = {
      description: "flaky",
      retry: { maxAttempts: 3, initialDelayMs: 600, jitter: 0 },
      execute: (_input, { stepId }) => {
        seen.push(stepId);
        if (failNext) {
          failNext = false;
          throw new Error("flake");
        }
        return "fine";
      },
    };
    const journal = memoryJournal();
    const loop = agentLoop$({ id: "m", model: callsThenAnswers("flaky"), tools: { flaky: tool } });
    const controller = new AbortController();
    const running = loop.run({ runId: "r", journal, input: "go", signal: controller.signal });
    for (let i = 0; i < 200 && attempts(await readJournal(journal, "r")).length === 0; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    controller.abort();
    const e = await rejection(running);
    if (!isAgentInterruptedError(e)) throw e;
    expect(e.run.reason).toBe("aborted");
    expect(seen).toHaveLength(1); // the back-off was cut short: no second attempt yet
    const resumedAt = Date.now();
    const out = await loop.run({ runId: "r", journal });
    expect(JSON.parse(out.content)).toBe("fine");
    expect(seen).toEqual(["m#turn:0:tool:0", "m#turn:0:tool:0"]);
    const [failed] = attempts(await readJournal(journal, "r"));
    expect(failed?.data).toMatchObject({ frameId: "m#turn:0:tool:0", attempt: 1 });
    // The second attempt did not start before the journaled retryAt.
    const second = (await readJournal(journal, "r")).filter(
      (x) => x.type === "frame.started" && x.data.frameId === "m#turn:0:tool:0",
    )[1];
    expect(Date.parse(second?.meta.at ?? "")).toBeGreaterThanOrEqual((failed?.data.retryAt as number) - 5);
    expect(Date.now() - resumedAt).toBeLessThan(600 + 500);
  });

  it("a tool that may be retried runs as its own toolCall chart: the wait between attempts is its backingOff state", async () => {
    const { tool } = flakyTool(1, { maxAttempts: 2, initialDelayMs: 5 });
    const walk: string[] = [];
    const inspect = (e: InspectionEvent) => {
      const snapshot = e.type === "@xstate.snapshot" ? (e.snapshot as { value?: unknown }) : undefined;
      if ((e.actorRef as AnyActorRef).id === "call:0" && typeof snapshot?.value === "string") walk.push(snapshot.value);
    };
    const loop = agentLoop$({ id: "m", model: callsThenAnswers("flaky"), tools: { flaky: tool } });
    await loop.run({ runId: "r", journal: memoryJournal(), input: "go", inspect });
    expect(walk).toEqual(["validating", "running", "backingOff", "running", "settled"]);
  });

  it("a resume under a loop whose tool no longer retries still waits out the journaled back-off in the chart", async () => {
    let failNext = true;
    const execute = () => {
      if (failNext) {
        failNext = false;
        throw new Error("flake");
      }
      return "fine";
    };
    const retried: Tool = { description: "flaky", retry: { maxAttempts: 3, initialDelayMs: 300, jitter: 0 }, execute };
    const journal = memoryJournal();
    const controller = new AbortController();
    const running = agentLoop$({ id: "m", model: callsThenAnswers("flaky"), tools: { flaky: retried } }).run({
      runId: "r",
      journal,
      input: "go",
      signal: controller.signal,
    });
    for (let i = 0; i < 200 && attempts(await readJournal(journal, "r")).length === 0; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    controller.abort();
    expect(isAgentInterruptedError(await rejection(running))).toBe(true);
    // The same tool without a policy: one attempt would make it a plainCall, but the journal holds a back-off.
    const plain: Tool = { description: "flaky", execute };
    const out = await agentLoop$({ id: "m", model: callsThenAnswers("flaky"), tools: { flaky: plain } }).run({
      runId: "r",
      journal,
    });
    expect(JSON.parse(out.content)).toBe("fine");
    const [failed] = attempts(await readJournal(journal, "r"));
    const second = (await readJournal(journal, "r")).filter(
      (x) => x.type === "frame.started" && x.data.frameId === "m#turn:0:tool:0",
    )[1];
    expect(Date.parse(second?.meta.at ?? "")).toBeGreaterThanOrEqual((failed?.data.retryAt as number) - 5);
  });

  it("a tool past its timeoutMs is aborted and fails: the model is fed a TimeoutError", async () => {
    let aborted = false;
    const slow: Tool = {
      description: "slow",
      timeoutMs: 50,
      execute: (_input, { signal }) =>
        new Promise((resolve) => {
          signal.addEventListener("abort", () => {
            aborted = true;
          });
          setTimeout(() => resolve("too late"), 5_000).unref();
        }),
    };
    const journal = memoryJournal();
    const out = await agentLoop$({ id: "m", model: callsThenAnswers("slow"), tools: { slow } }).run({
      runId: "r",
      journal,
      input: "go",
    });
    expect(aborted).toBe(true);
    expect(JSON.parse(out.content)).toEqual({
      error: "TimeoutError",
      message: "slow (step m#turn:0:tool:0) did not answer within 50 ms",
    });
    expect(failedFrames(await readJournal(journal, "r"))).toEqual(["m#turn:0:tool:0"]);
  });
});

describe("the run deadline (timeouts.runMs)", () => {
  it("is journaled once at the start and holds across a resume: past it, the run interrupts with deadline", async () => {
    let calls = 0;
    const model: Model = {
      generate: async () => {
        calls++;
        return calls === 1 ? { toolCalls: [{ id: "c1", name: "ask", input: {} }] } : { content: "x", toolCalls: [] };
      },
    };
    const ask: Tool = { description: "needs a person", requiresApproval: true, execute: () => "yes" };
    const loop = agentLoop$({ id: "m", model, tools: { ask }, timeouts: { runMs: 200 } });
    const journal = memoryJournal();
    const first = await rejection(loop.run({ runId: "r", journal, input: "go" }));
    if (!isAgentInterruptedError(first)) throw first;
    expect(first.run.reason).toBe("approval-pending");
    const decisions = (await readJournal(journal, "r")).filter((e) => e.type === "decision.recorded");
    const deadline = decisions.find((e) => e.data.decisionId === "m#deadline");
    expect(deadline?.data.choice).toMatchObject({ runMs: 200 });
    await new Promise((r) => setTimeout(r, 250)); // suspended past the deadline
    const second = await rejection(loop.run({ runId: "r", journal, approvals: { "m#turn:0:tool:0": true } }));
    if (!isAgentInterruptedError(second)) throw second;
    expect(second.run.reason).toBe("deadline");
    expect(calls).toBe(1);
    const again = (await readJournal(journal, "r")).filter(
      (e) => e.type === "decision.recorded" && e.data.decisionId === "m#deadline",
    );
    expect(again).toHaveLength(1);
  });
});

describe("the run deadline stops a tool", () => {
  it("a tool still running at the deadline is aborted and fails; the run then interrupts with deadline", async () => {
    let aborted = false;
    const slow: Tool = {
      description: "slow",
      execute: (_input, { signal }) =>
        new Promise((resolve) => {
          signal.addEventListener("abort", () => {
            aborted = true;
          });
          setTimeout(() => resolve("too late"), 5_000).unref();
        }),
    };
    let calls = 0;
    const model: Model = {
      generate: async () => {
        calls++;
        return { toolCalls: [{ id: "c1", name: "slow", input: {} }] };
      },
    };
    const journal = memoryJournal();
    const started = Date.now();
    const loop = agentLoop$({ id: "m", model, tools: { slow }, timeouts: { runMs: 150 } });
    const e = await rejection(loop.run({ runId: "r", journal, input: "go" }));
    if (!isAgentInterruptedError(e)) throw e;
    expect(e.run.reason).toBe("deadline");
    expect(e.message).toContain("deadline");
    expect(aborted).toBe(true);
    expect(calls).toBe(1);
    expect(Date.now() - started).toBeLessThan(2_000);
    const entries = await readJournal(journal, "r");
    expect(failedFrames(entries)).toEqual(["m#turn:0:tool:0"]);
  });
});

describe("configuration", () => {
  const model: Model = { generate: async () => ({ toolCalls: [] }) };
  const tool: Tool = { description: "t", execute: () => 1 };
  for (const [config, field] of [
    [{ retry: { model: { maxAttempts: 0 } } }, "retry.model.maxAttempts"],
    [{ retry: { tools: { jitter: 2 } } }, "retry.tools.jitter"],
    [{ retry: { everything: {} } }, "retry.everything"],
    [{ timeouts: { modelAttemptMs: -1 } }, "timeouts.modelAttemptMs"],
    [{ timeouts: { firstChunkMs: 0 } }, "timeouts.firstChunkMs"],
    [{ timeouts: { chunkIdleMs: 2.5 } }, "timeouts.chunkIdleMs"],
    [{ timeouts: { firstTokenMs: 1000 } }, "timeouts.firstTokenMs"],
    [{ tools: { t: { ...tool, retry: { factor: 0.5 } } } }, "tools.t.retry.factor"],
    [{ tools: { t: { ...tool, timeoutMs: 1.5 } } }, "tools.t.timeoutMs"],
  ] as const) {
    it(`refuses ${field} with AgentLoopConfigError naming it`, () => {
      let thrown: unknown;
      try {
        agentLoop$({ id: "m", model, ...(config as object) });
      } catch (e) {
        thrown = e;
      }
      expect(isAgentLoopConfigError(thrown)).toBe(true);
      expect((thrown as Error).message).toContain(field);
    });
  }

  it("takes the streaming limits firstChunkMs and chunkIdleMs", () => {
    expect(() => agentLoop$({ id: "m", model, timeouts: { firstChunkMs: 20_000, chunkIdleMs: 5_000 } })).not.toThrow();
  });
});

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isAgentLoopConfigError, isDefinitionChangedError, isReplayDivergenceError } from "../../src/core/errors.ts";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { Message } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { GenerateRequest } from "../../src/models/types.ts";
import type { AgentStep, LeanAgentStep } from "../../src/projections/types.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { type AgentInterruptedError, isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const call = (name: string, input: unknown, id = name) => ({ id, name, input });
const toolMessages = (messages: readonly Message[]) =>
  messages.filter((m): m is Extract<Message, { role: "tool" }> => m.role === "tool");

async function interrupted(p: Promise<unknown>): Promise<AgentInterruptedError> {
  try {
    await p;
  } catch (e) {
    if (isAgentInterruptedError(e)) return e;
    throw e;
  }
  throw new Error("expected the run to be interrupted");
}

async function journalLength(journal: Journal, runId: string) {
  return (await readJournal(journal, runId)).length;
}

const add: Tool = { description: "adds", execute: (i) => ({ sum: (i as { a: number }).a + (i as { b: number }).b }) };

describe("calls settled without running a tool", () => {
  it("refuses an unknown tool, an oversized input, an invalid input; answers search_tools and skill activation", async () => {
    const seen: GenerateRequest[] = [];
    const model = scriptedModel((ctx) => {
      seen.push(ctx.request);
      return ctx.turn === 0
        ? {
            toolCalls: [
              call("nope", {}),
              call("add", { a: 1, b: 2, pad: "x".repeat(200) }, "big"),
              call("strict", { n: "not a number" }),
              call("search_tools", { query: "adds" }),
              call("activate_skill", { name: "math" }),
            ],
          }
        : { content: "ok", toolCalls: [] };
    });
    const strict: Tool = {
      description: "needs a number",
      validateInput: (i) =>
        typeof (i as { n?: unknown }).n === "number"
          ? { ok: true, value: i }
          : { ok: false, message: "n must be a number" },
      execute: () => {
        throw new Error("never runs");
      },
    };
    const loop = agentLoop$({
      id: "s",
      model,
      tools: { add, strict },
      maxToolInputBytes: 100,
      skills: { math: { description: "arithmetic", instructions: "add carefully" } },
      toolCallLog: "lean",
    });
    const journal = jsonJournal();
    const out = await loop.run({ runId: "r", input: "go", journal });
    const entries = await readJournal(journal, "r");
    const settled = entries
      .flatMap((e) => (e.type === "call.settled" ? [e.data] : []))
      .sort((a, b) => a.stepId.localeCompare(b.stepId)); // calls settle concurrently: journal order varies
    expect(settled.map((s) => [s.reason, s.status])).toEqual([
      ["unknown-tool", "error"],
      ["input-too-large", "error"],
      ["invalid-input", "error"],
      ["search-tools", "ok"],
      ["skill-activation", "ok"],
    ]);
    expect(entries.filter((e) => e.type === "frame.started").length).toBe(2); // the two model calls only
    const fed = toolMessages(seen[1]?.messages ?? []);
    expect(fed.map((m) => m.isError)).toEqual([true, true, true, false, false]);
    expect(fed[3]?.output).toEqual([{ name: "add", description: "adds" }]);
    expect(fed[2]?.output).toEqual({ error: "invalid-input", message: "n must be a number" });
    expect((out.toolCallLog as LeanAgentStep[]).map((s) => s.status)).toEqual(["error", "error", "error", "ok", "ok"]);
  });
});

describe("tool failures", () => {
  it("feeds a failing tool's error back, records it as the outcome decision, and goes on (flaky tool)", async () => {
    let attempts = 0;
    const flaky: Tool = {
      description: "fails once",
      execute: () => {
        attempts++;
        if (attempts === 1) throw new Error("temporarily unavailable");
        return { ok: true };
      },
    };
    const model = scriptedModel([
      { toolCalls: [call("flaky", {})] },
      { toolCalls: [call("flaky", {})] },
      { content: "done", toolCalls: [] },
    ]);
    const journal = jsonJournal();
    const out = await agentLoop$({ id: "f", model, tools: { flaky } }).run({ runId: "r", input: "go", journal });
    expect(out.toolCallLog).toEqual([
      {
        iteration: 0,
        toolName: "flaky",
        toolInput: {},
        toolOutput: { error: "Error", message: "temporarily unavailable" },
      },
      { iteration: 1, toolName: "flaky", toolInput: {}, toolOutput: { ok: true } },
    ]);
    const entries = await readJournal(journal, "r");
    const outcome = entries.find(
      (e) => e.type === "decision.recorded" && e.data.decisionId === "f#turn:0:tool:0:outcome",
    );
    expect(outcome?.data).toMatchObject({
      source: "tool-outcome",
      choice: { failed: { message: "temporarily unavailable" } },
    });
    const failedFrame = entries.find((e) => e.type === "frame.completed" && e.data.frameId === "f#turn:0:tool:0");
    expect(failedFrame?.data).toEqual({ frameId: "f#turn:0:tool:0", failed: true });
  });
});

describe("interruptions and resume", () => {
  it("stops at the iteration limit (tools of the last allowed call still run) and goes on under a higher limit", async () => {
    const model = scriptedModel((ctx) =>
      ctx.turn < 4 ? { toolCalls: [call("add", { a: ctx.turn, b: 1 })] } : { content: "end", toolCalls: [] },
    );
    const journal = jsonJournal();
    const e = await interrupted(
      agentLoop$({ id: "m", model, tools: { add }, maxIterations: 2 }).run({ runId: "r", input: "go", journal }),
    );
    expect(e.code).toBe("agentInterrupted");
    expect(e.run.reason).toBe("max-iterations");
    expect(e.run.iterations).toBe(2);
    expect(e.run.toolCallLog).toHaveLength(2);
    const out = await agentLoop$({ id: "m", model, tools: { add }, maxIterations: 10 }).run({ runId: "r", journal });
    expect(out.iterations).toBe(5);
    expect(out.toolCallLog).toHaveLength(4);
    expect(model.calls).toBe(5);
  });

  it("an abort in the middle of a tool interrupts; the unknown outcome is retried with the same stepId on resume", async () => {
    const stepIds: string[] = [];
    const controller = new AbortController();
    const slow: Tool = {
      description: "waits for the signal the first time",
      execute: (_, { stepId, signal }) => {
        stepIds.push(stepId);
        if (stepIds.length > 1) return { finished: true };
        return new Promise((_, reject) => {
          signal.addEventListener("abort", () => reject(new Error("stopped")));
          setTimeout(() => controller.abort(), 5);
        });
      },
    };
    const model = scriptedModel([{ toolCalls: [call("slow", {})] }, { content: "done", toolCalls: [] }]);
    const loop = agentLoop$({ id: "a", model, tools: { slow }, toolCallLog: "lean" });
    const journal = jsonJournal();
    const e = await interrupted(loop.run({ runId: "r", input: "go", journal, signal: controller.signal }));
    expect(e.run.reason).toBe("aborted");
    expect(e.run.toolCallLog).toEqual([]);
    const types = (await readJournal(journal, "r")).map((x) => x.type);
    expect(types.slice(-2)).toEqual(["frame.started", "run.interrupted"]);
    const out = await loop.run({ runId: "r", journal });
    expect(stepIds).toEqual(["a#turn:0:tool:0", "a#turn:0:tool:0"]);
    expect(out.toolCallLog).toMatchObject([{ status: "ok", stepId: "a#turn:0:tool:0" }]);
  });

  it('a tool with onUnknownOutcome "fail" is not run twice: the model is fed an error', async () => {
    let runs = 0;
    const controller = new AbortController();
    const once: Tool = {
      description: "must not run twice",
      onUnknownOutcome: "fail",
      execute: (_, { signal }) => {
        runs++;
        return new Promise((_, reject) => {
          signal.addEventListener("abort", () => reject(new Error("stopped")));
          setTimeout(() => controller.abort(), 5);
        });
      },
    };
    const model = scriptedModel([{ toolCalls: [call("once", {})] }, { content: "done", toolCalls: [] }]);
    const loop = agentLoop$({ id: "o", model, tools: { once } });
    const journal = jsonJournal();
    await interrupted(loop.run({ runId: "r", input: "go", journal, signal: controller.signal }));
    const out = await loop.run({ runId: "r", journal });
    expect(runs).toBe(1);
    expect((out.toolCallLog[0] as AgentStep).toolOutput).toMatchObject({ error: "outcome-unknown" });
  });

  it("a completed run resolves to its recorded output and calls nothing", async () => {
    const model = scriptedModel([{ toolCalls: [call("add", { a: 1, b: 1 })] }, { content: "2", toolCalls: [] }]);
    const journal = jsonJournal();
    const loop = agentLoop$({ id: "c", model, tools: { add } });
    const first = await loop.run({ runId: "r", input: "go", journal });
    const length = await journalLength(journal, "r");
    const again = await loop.run({ runId: "r", journal });
    expect(again).toEqual(first);
    expect(model.calls).toBe(2);
    expect(await journalLength(journal, "r")).toBe(length);
  });
});

describe("approvals", () => {
  it("interrupts for a pending approval and resumes with it after a process restart (sqlite journal)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-approval-"));
    dirs.push(dir);
    const path = join(dir, "loom.db");
    let executed = 0;
    const transfer: Tool = {
      description: "moves money",
      requiresApproval: true,
      execute: () => ({ done: ++executed }),
    };
    const model = scriptedModel([{ toolCalls: [call("transfer", { amount: 5 })] }, { content: "sent", toolCalls: [] }]);
    const loop = agentLoop$({ id: "p", model, tools: { transfer } });
    let journal = openSqliteJournal(path);
    const e = await interrupted(loop.run({ runId: "r", input: "pay", journal }));
    expect(e.run.reason).toBe("approval-pending");
    expect(e.run.pendingApprovals).toEqual([{ stepId: "p#turn:0:tool:0", toolName: "transfer", input: { amount: 5 } }]);
    expect(executed).toBe(0);
    await journal.close();

    journal = openSqliteJournal(path); // a new process would do exactly this
    const out = await loop.run({ runId: "r", journal, approvals: { "p#turn:0:tool:0": true } });
    expect(out.content).toBe("sent");
    expect(executed).toBe(1);
    const decisions = (await readJournal(journal, "r")).flatMap((x) =>
      x.type === "decision.recorded" ? [x.data] : [],
    );
    expect(decisions.find((d) => d.source === "approval")?.choice).toMatchObject({ approved: true });
    await journal.close();
  });

  it("asks approve once; a declined call is settled and fed back as an error", async () => {
    const asked: string[] = [];
    const transfer: Tool = { description: "moves money", requiresApproval: true, execute: () => ({ moved: true }) };
    const model = scriptedModel([{ toolCalls: [call("transfer", { amount: 5 })] }, { content: "ok", toolCalls: [] }]);
    const loop = agentLoop$({
      id: "d",
      model,
      tools: { transfer },
      approve: ({ stepId }) => {
        asked.push(stepId);
        return false;
      },
    });
    const out = await loop.run({ runId: "r", input: "pay", journal: jsonJournal() });
    expect(asked).toEqual(["d#turn:0:tool:0"]);
    expect((out.toolCallLog[0] as AgentStep).toolOutput).toMatchObject({ error: "approval-declined" });
  });
});

describe("replay divergence", () => {
  async function pendingRun() {
    const journal = jsonJournal(memoryStore({ json: true }));
    const model = scriptedModel([
      { toolCalls: [call("add", { a: 1, b: 2 })] },
      { toolCalls: [call("add", { a: 3, b: 4 })] },
      { content: "done", toolCalls: [] },
    ]);
    await interrupted(
      agentLoop$({ id: "v", model, tools: { add }, maxIterations: 1 }).run({ runId: "r", input: "go", journal }),
    );
    return { journal, model };
  }

  it("refuses a renamed tool before any append: the definition pin names it, the frame guard holds when it is accepted", async () => {
    const { journal, model } = await pendingRun();
    const length = await journalLength(journal, "r");
    const pinned = await agentLoop$({ id: "v", model, tools: { plus: add } })
      .run({ runId: "r", journal })
      .catch((e) => e);
    expect(isDefinitionChangedError(pinned)).toBe(true);
    expect(pinned.changes).toEqual(['tool "add" removed', 'tool "plus" added']);
    const accepted = await agentLoop$({
      id: "v",
      model,
      tools: { plus: add },
      acceptDefinitionChanges: ["tool-added", "tool-removed"],
    })
      .run({ runId: "r", journal })
      .catch((e) => e);
    expect(isReplayDivergenceError(accepted)).toBe(true);
    expect(accepted.message).toContain("v#turn:0:tool:0");
    expect(await journalLength(journal, "r")).toBe(length);
  });

  it("refuses another loop id, and a changed prompt (system prompt), before any append", async () => {
    const { journal, model } = await pendingRun();
    const length = await journalLength(journal, "r");
    const otherId = await agentLoop$({ id: "w", model, tools: { add } })
      .run({ runId: "r", journal })
      .catch((e) => e);
    expect(isReplayDivergenceError(otherId)).toBe(true);
    const otherPrompt = await agentLoop$({ id: "v", model, tools: { add }, system: "be brief" })
      .run({ runId: "r", journal })
      .catch((e) => e);
    expect(isDefinitionChangedError(otherPrompt)).toBe(true);
    expect(otherPrompt.changes).toEqual(["the system prompt changed"]);
    expect(await journalLength(journal, "r")).toBe(length);
  });
});

describe("mode pin (ADR 0142 D3)", () => {
  it("refuses a resume configured with the other mode before any append; an unset option follows the pin", async () => {
    const model = scriptedModel([{ toolCalls: [call("add", { a: 1, b: 2 })] }, { content: "3", toolCalls: [] }]);
    const journal = jsonJournal();
    await interrupted(
      agentLoop$({ id: "k", model, tools: { add }, toolCallLog: "lean", maxIterations: 1 }).run({
        runId: "r",
        input: "go",
        journal,
      }),
    );
    const length = await journalLength(journal, "r");
    const err = await agentLoop$({ id: "k", model, tools: { add }, toolCallLog: "full" })
      .run({ runId: "r", journal })
      .catch((e) => e);
    expect(isAgentLoopConfigError(err)).toBe(true);
    expect(err.message).toMatch(/recorded toolCallLog "lean" but is configured "full"/);
    expect(await journalLength(journal, "r")).toBe(length);
    const out = await agentLoop$({ id: "k", model, tools: { add } }).run({ runId: "r", journal });
    expect(out.toolCallLog[0]).toMatchObject({ status: "ok", stepId: "k#turn:0:tool:0" });
  });

  it("journals a late pin on resume and returns the whole log in that shape", async () => {
    const model = scriptedModel([
      { toolCalls: [call("add", { a: 1, b: 2 })] },
      { toolCalls: [call("add", { a: 2, b: 2 })] },
      { content: "4", toolCalls: [] },
    ]);
    const journal = jsonJournal();
    await interrupted(
      agentLoop$({ id: "l", model, tools: { add }, maxIterations: 1 }).run({ runId: "r", input: "go", journal }),
    );
    const out = await agentLoop$({ id: "l", model, tools: { add }, toolCallLog: "lean" }).run({ runId: "r", journal });
    expect(out.toolCallLog.map((s) => "stepId" in s && s.stepId)).toEqual(["l#turn:0:tool:0", "l#turn:1:tool:0"]);
    const pins = (await readJournal(journal, "r")).filter(
      (e) => e.type === "decision.recorded" && e.data.source === "agent-tool-call-log",
    );
    expect(pins).toHaveLength(1);
  });
});

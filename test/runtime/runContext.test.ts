import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { RunEvent } from "../../src/projections/events.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";
import { jsonJournal } from "../support/loop.ts";

const CHILD = "p/boss#turn:0:tool:0";
const STEP = "worker#turn:0:tool:0";

/**
 * boss → worker (at most one worker going per boss run), whose refund needs an approval. The
 * workers' first model calls wait for each other (or 1 s), so two chains run interleaved.
 */
function chain(label: string, arrivals: { seen: number; both: Promise<void>; arrive: () => void }) {
  const refunds: unknown[] = [];
  const refund: Tool = {
    description: "refunds an order",
    requiresApproval: true,
    execute: (input) => {
      refunds.push(input);
      return { refunded: (input as { order: string }).order };
    },
  };
  const worker = agentLoop$({
    id: "worker",
    model: scriptedModel(async ({ turn, messages }) => {
      if (turn > 0) return { content: `worker ${label} done`, toolCalls: [] };
      arrivals.arrive();
      await Promise.race([arrivals.both, new Promise((r) => setTimeout(r, 1000))]);
      return {
        toolCalls: [{ id: "r", name: "refund", input: { order: (messages[0] as { content: string }).content } }],
      };
    }),
    tools: { refund },
  });
  const boss = agentLoop$({
    id: "boss",
    model: scriptedModel(({ turn, messages }) =>
      turn === 0
        ? { toolCalls: [{ id: "d", name: "delegate", input: { prompt: label } }] }
        : { content: JSON.stringify(messages.filter((m) => m.role === "tool").map((m) => m.output)), toolCalls: [] },
    ),
    tools: { delegate: agentTool(worker, { description: "does it", maxConcurrent: 1 }) },
  });
  return { boss, refunds };
}

function meeting() {
  let arrive = () => {};
  const both = new Promise<void>((resolve) => {
    let seen = 0;
    arrive = () => {
      seen += 1;
      if (seen === 2) resolve();
    };
  });
  return { seen: 0, both, arrive: () => arrive() };
}

describe("RunContext: one context per run, passed to tools as ToolContext.run", () => {
  it("keeps two interleaved parent runs (same run id, two journals, one process) apart: fan-out, events, approvals", async () => {
    const journals = { A: jsonJournal(), B: jsonJournal() };
    const first = meeting();
    const chains = { A: chain("A", first), B: chain("B", first) };
    const events = { A: [] as RunEvent[], B: [] as RunEvent[] };
    const stopped = await Promise.all(
      (["A", "B"] as const).map((k) =>
        chains[k].boss
          .run({ runId: "p", journal: journals[k], input: `go ${k}`, onEvent: (e) => events[k].push(e) })
          .catch((e) => e),
      ),
    );
    // Each boss has its one worker going at once: neither is refused by the other's (maxConcurrent 1).
    for (const e of stopped) {
      expect(isAgentInterruptedError(e) && e.run.reason).toBe("approval-pending");
      expect(e.run.pendingApprovals).toEqual([expect.objectContaining({ runId: CHILD, stepId: STEP })]);
    }
    // Each parent's stream holds its own worker's events only.
    for (const k of ["A", "B"] as const) {
      const other = k === "A" ? "B" : "A";
      const nested = events[k].filter((e) => e.runId === CHILD);
      expect(nested.find((e) => e.type === "run-started")).toMatchObject({ input: k });
      expect(nested.length).toBeGreaterThan(1);
      expect(JSON.stringify(nested)).not.toContain(`"input":"${other}"`);
    }

    // Resumed interleaved, with opposite answers: each worker gets its own parent's.
    const second = meeting();
    const again = { A: chain("A", second), B: chain("B", second) };
    const outs = await Promise.all([
      again.A.boss.run({ runId: "p", journal: journals.A, approvals: { [STEP]: true } }),
      again.B.boss.run({ runId: "p", journal: journals.B, approvals: { [STEP]: false } }),
    ]);
    expect(outs.map((o) => o.content)).toEqual(['["worker A done"]', '["worker B done"]']);
    expect(again.A.refunds).toEqual([{ order: "A" }]);
    expect(again.B.refunds).toEqual([]);
    const decided = async (k: "A" | "B") =>
      (await readJournal(journals[k], CHILD)).filter((e) => e.type === "decision.recorded").map((e) => e.data);
    expect(await decided("A")).toMatchObject([{ choice: { approved: true } }]);
    expect(await decided("B")).toMatchObject([{ choice: { approved: false } }]);
  });

  it("hands each tool its run's context: run id, depth, parent and the sub-agents going now", async () => {
    const seen: { runId: string; depth: number; parent?: string; siblings?: string[]; children: number }[] = [];
    const probe: Tool = {
      description: "looks at its run",
      execute: (_input, { run }) => {
        if (run === undefined) throw new Error("no ToolContext.run");
        seen.push({
          runId: run.runId,
          depth: run.depth,
          parent: run.parent?.runId,
          siblings: run.parent && [...run.parent.children].map((c) => c.runId),
          children: run.children.size,
        });
        return "looked";
      },
    };
    const child = agentLoop$({
      id: "child",
      model: scriptedModel(({ turn }) =>
        turn === 0 ? { toolCalls: [{ id: "c", name: "probe", input: {} }] } : { content: "child done", toolCalls: [] },
      ),
      tools: { probe },
    });
    const parent = agentLoop$({
      id: "parent",
      model: scriptedModel(({ turn }) =>
        turn === 0
          ? { toolCalls: [{ id: "s", name: "sub", input: { prompt: "x" } }] }
          : turn === 1
            ? { toolCalls: [{ id: "q", name: "probe", input: {} }] }
            : { content: "done", toolCalls: [] },
      ),
      tools: { sub: agentTool(child, { description: "a sub-agent" }), probe },
    });
    await parent.run({ runId: "p", journal: jsonJournal(), input: "go" });
    const id = "p/parent#turn:0:tool:0";
    expect(seen).toEqual([
      // In the sub-agent's run: one deeper, its parent's context holding it while it goes.
      { runId: id, depth: 1, parent: "p", siblings: [id], children: 0 },
      // In the parent's own run, after the sub-agent's call settled: no child held any more.
      { runId: "p", depth: 0, children: 0 },
    ]);
  });

  it("keeps no module-level registry of runs: the sub-run modules hold no Map, Set or AsyncLocalStorage", () => {
    const files = [
      "agentLoop.ts",
      "agentTool.ts",
      "runContext.ts",
      "subAgentTools.ts",
      "subRunApprovals.ts",
      "subRunEvents.ts",
      "subRunInspect.ts",
      "subRuns.ts",
      "toolActors.ts",
      "approvalActor.ts",
    ];
    // Each file sits in one of the runtime's rooms (run/, steps/, subruns/, …): looked up there.
    const runtime = new URL("../../src/runtime/", import.meta.url);
    const rooms = readdirSync(runtime, { withFileTypes: true }).filter((e) => e.isDirectory());
    const held: string[] = [];
    let read = 0;
    for (const name of files) {
      const room = rooms.find((r) => existsSync(new URL(`${r.name}/${name}`, runtime)));
      if (room === undefined) continue; // counted below: a file merged into another is taken off the list
      const text = readFileSync(new URL(`${room.name}/${name}`, runtime), "utf8");
      read++;
      // Top-level declarations only: a class's or a function's own state is per instance or per call.
      for (const line of text.split("\n")) {
        // An empty one, filled as runs go (a constant table like `new Set(["run.completed", …])` is no state).
        if (/^(export )?(const|let|var) \w+[^=]*= new (Weak)?(Map|Set)\b.*\(\);/.test(line))
          held.push(`${name}: ${line}`);
        if (/AsyncLocalStorage/.test(line)) held.push(`${name}: ${line}`);
      }
    }
    expect(read).toBe(files.length);
    expect(held).toEqual([]);
  });
});

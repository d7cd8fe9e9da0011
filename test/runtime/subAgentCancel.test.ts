import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isRunCancelledError } from "../../src/core/errors.ts";
import { readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { EventStore, ListRunsOptions } from "../../src/events/store.ts";
import type { ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { cancelRun, listPendingApprovals } from "../../src/runtime/control/operations.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";
import { inProcess } from "../support/journalFile.ts";
import { jsonJournal } from "../support/loop.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-subagent-cancel-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ask = (name: string, input: unknown): ModelResponse => ({ toolCalls: [{ id: `${name}-1`, name, input }] });
const lastResult = (messages: readonly { role: string; output?: unknown }[]) =>
  JSON.stringify(messages.filter((m) => m.role === "tool").at(-1)?.output);
const lastType = async (journal: Journal, runId: string) => (await readJournal(journal, runId)).at(-1)?.type;

const CHILD = "p/planner#turn:0:tool:0";
const GRANDCHILD = `${CHILD}/researcher#turn:0:tool:0`;

/** planner → researcher → worker, whose `work` tool is given (it waits, or needs an approval). */
function chain(work: Tool) {
  const models = {
    worker: scriptedModel(({ turn, messages }) =>
      turn === 0 ? ask("work", {}) : { content: `worker: ${lastResult(messages)}`, toolCalls: [] },
    ),
    researcher: scriptedModel(({ turn, messages }) =>
      turn === 0 ? ask("dig", { prompt: "dig" }) : { content: `researcher: ${lastResult(messages)}`, toolCalls: [] },
    ),
    planner: scriptedModel(({ turn, messages }) =>
      turn === 0 ? ask("research", { prompt: "go" }) : { content: `planner: ${lastResult(messages)}`, toolCalls: [] },
    ),
  };
  const worker = agentLoop$({ id: "worker", model: models.worker, tools: { work } });
  const researcher = agentLoop$({
    id: "researcher",
    model: models.researcher,
    tools: { dig: agentTool(worker, { description: "works" }) },
  });
  const planner = agentLoop$({
    id: "planner",
    model: models.planner,
    tools: { research: agentTool(researcher, { description: "researches" }) },
  });
  const calls = () => [models.planner.calls, models.researcher.calls, models.worker.calls];
  return { planner, calls };
}

describe("cancelling a parent cancels its sub-agents", () => {
  it("stops a chain running a grandchild's tool: every run ends run.cancelled, the tool's signal aborted", async () => {
    const journal = jsonJournal();
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const work: Tool = {
      description: "waits until stopped",
      execute: (_input, { signal }) =>
        new Promise((_, reject) => {
          started();
          signal.addEventListener("abort", () => reject(signal.reason));
        }),
    };
    const { planner, calls } = chain(work);
    const outcome = planner.run({ runId: "p", journal, input: "go", ownership: { leaseMs: 300 } }).then(
      () => "completed",
      (e: unknown) => e,
    );
    await running;
    const result = await cancelRun(journal, "p", { reason: "operator stop", waitMs: 10_000 });
    expect(result).toEqual({
      status: "cancelled",
      subRuns: [
        { runId: CHILD, status: "cancelled" },
        { runId: GRANDCHILD, status: "cancelled" },
      ],
    });
    expect(isRunCancelledError(await outcome)).toBe(true);
    for (const runId of ["p", CHILD, GRANDCHILD]) expect(await lastType(journal, runId)).toBe("run.cancelled");
    expect(calls()).toEqual([1, 1, 1]);
    // Never resumed, at any level.
    const again = chain(work);
    expect(isRunCancelledError(await again.planner.run({ runId: "p", journal }).catch((e) => e))).toBe(true);
    expect(again.calls()).toEqual([0, 0, 0]);
  });

  it("ends a chain waiting for a grandchild's approval in the journal itself (SQLite): nothing waits any more", async () => {
    const file = join(dir, "pending.db");
    const work: Tool = { description: "needs a yes", requiresApproval: true, execute: () => "done" };
    await inProcess(file, (journal) =>
      chain(work)
        .planner.run({ runId: "p", journal, input: "go" })
        .catch((e) => e),
    );
    await inProcess(file, async (journal) => {
      expect(await listPendingApprovals(journal)).toHaveLength(1);
      const result = await cancelRun(journal, "p", { reason: "not needed" });
      expect(result.subRuns?.map((s) => [s.runId, s.status])).toEqual([
        [CHILD, "cancelled"],
        [GRANDCHILD, "cancelled"],
      ]);
      for (const runId of ["p", CHILD, GRANDCHILD]) {
        expect((await readJournal(journal, runId)).at(-1)).toMatchObject({
          type: "run.cancelled",
          data: { reason: "not needed" },
        });
      }
      expect(await listPendingApprovals(journal)).toEqual([]);
    });
  });

  it("finds the sub-agent runs by their run id prefix, not by listing every run (and filters a store that lists all)", async () => {
    const work: Tool = { description: "needs a yes", requiresApproval: true, execute: () => "done" };
    for (const honours of [true, false]) {
      const inner = memoryStore({ json: true });
      const asked: (ListRunsOptions | undefined)[] = [];
      const store: EventStore = Object.create(inner, {
        listRuns: {
          value: (options?: ListRunsOptions) => {
            asked.push(options);
            return inner.listRuns(honours ? options : undefined);
          },
        },
      });
      const journal = jsonJournal(store);
      await chain(work)
        .planner.run({ runId: "p", journal, input: "go" })
        .catch((e) => e);
      // Runs beside the chain: none of them is cancelled with it.
      const started = { type: "run.started", data: { loopId: "x", input: "go", tools: [] } } as const;
      for (const runId of ["p0", "p.x", "q/p/x", "p/not-a-step"])
        await store.append(runId, [started], { expectedVersion: 0 });
      const result = await cancelRun(journal, "p", { reason: "stop" });
      expect(result.subRuns?.map((s) => s.runId)).toEqual([CHILD, GRANDCHILD]);
      expect(asked).toEqual([{ prefix: "p/" }]);
      for (const runId of ["p0", "p.x", "q/p/x", "p/not-a-step"])
        expect(await lastType(journal, runId)).toBe("run.started");
    }
  });

  it("a sub-agent cancelled on its own fails its parent's call (SubAgentCancelledError, told to the model); the parent goes on", async () => {
    const file = join(dir, "child.db");
    const work: Tool = { description: "needs a yes", requiresApproval: true, execute: () => "done" };
    await inProcess(file, (journal) =>
      chain(work)
        .planner.run({ runId: "p", journal, input: "go" })
        .catch((e) => e),
    );
    const out = await inProcess(file, async (journal) => {
      const result = await cancelRun(journal, CHILD, { reason: "wrong question" });
      expect(result.subRuns?.map((s) => s.runId)).toEqual([GRANDCHILD]);
      expect(await lastType(journal, "p")).toBe("run.interrupted");
      const resumed = chain(work);
      const done = await resumed.planner.run({ runId: "p", journal });
      expect(resumed.calls()).toEqual([1, 0, 0]); // the planner's answer; its sub-agents are not run again
      return done;
    });
    expect(out.toolCallLog[0]?.toolOutput).toEqual({
      error: "SubAgentCancelledError",
      message: `the sub-agent run ${CHILD} was cancelled (wrong question) and will not go on; answer without it, or ask for it again (a new call is a new sub-agent run)`,
    });
    expect(out.content).toContain("SubAgentCancelledError");
  });
});

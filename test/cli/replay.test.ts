import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { InspectionEvent } from "xstate";
import { replayRun } from "../../src/cli/replay.ts";
import {
  type AgentLoopConfig,
  agentLoop$,
  cancelRun,
  createJournal,
  isAgentInterruptedError,
  isRunCancelledError,
  type Journal,
  memoryStore,
  openSqliteJournal,
  readJournal,
  rebuildToolCallLog,
  scriptedModel,
  type Tool,
} from "../../src/index.ts";
import { compact, foldEntries, hydrateArchived } from "../../src/journal.ts";

/**
 * `loom inspect`'s replay runs the real chart on a copy of the recording: it must end the way the
 * recorded run ended, serve every recorded step (no tool or model is called again), and read
 * archived outputs back from the run's own journal.
 */
const lookup = (calls: { n: number }): Tool => ({
  description: "looks up",
  execute: async (input) => {
    calls.n++;
    return { found: input };
  },
});

async function record(config: Partial<AgentLoopConfig>, journal: Journal, approvals?: Record<string, boolean>) {
  const calls = { n: 0 };
  const loop = agentLoop$({
    id: "rec",
    model: scriptedModel(({ turn }) =>
      turn < 3
        ? { toolCalls: [{ id: `c${turn}`, name: "lookup", input: { turn } }] }
        : { content: "done", toolCalls: [] },
    ),
    tools: { lookup: lookup(calls) },
    ...config,
  } as AgentLoopConfig);
  try {
    await loop.run({ runId: "r", input: "go", journal, ...(approvals ? { approvals } : {}) });
  } catch (e) {
    if (!isAgentInterruptedError(e)) throw e;
  }
  return calls;
}

async function replay(journal: Journal) {
  const entries = await readJournal(journal, "r");
  const state = foldEntries(entries);
  await hydrateArchived(journal, state);
  const lean = await rebuildToolCallLog(journal, "r", "lean");
  let snapshots = 0;
  const result = await replayRun(journal, entries, state, lean, {
    inspect: (e: InspectionEvent) => {
      if (e.type === "@xstate.snapshot") snapshots++;
    },
  });
  expect(snapshots).toBeGreaterThan(0); // the inspector saw the walk
  return { result, entriesBefore: entries.length, after: (await readJournal(journal, "r")).length };
}

describe("loom inspect's replay walks the real chart over a copy of the recording", () => {
  it("a completed run: ends completed, every tool result served and matching, the journal untouched", async () => {
    const journal = createJournal({ store: memoryStore() });
    await record({}, journal);
    const { result, entriesBefore, after } = await replay(journal);
    expect(result).toEqual({ ended: "completed", turns: 4, matching: 3, of: 3, subRuns: [] });
    expect(after).toBe(entriesBefore);
  });

  it("ends as the run ended: the iteration limit, and a pending approval", async () => {
    const limited = createJournal({ store: memoryStore() });
    await record({ maxIterations: 2 }, limited);
    expect((await replay(limited)).result).toMatchObject({ ended: "interrupted (max-iterations)", matching: 2, of: 2 });

    const asked = createJournal({ store: memoryStore() });
    await record({ tools: { lookup: { ...lookup({ n: 0 }), requiresApproval: true } } }, asked, {
      "rec#turn:0:tool:0": true,
    });
    expect((await replay(asked)).result).toMatchObject({ ended: "interrupted (approval-pending)", matching: 1 });
  });

  it("ends on the model's recorded error, without retrying it", async () => {
    const journal = createJournal({ store: memoryStore() });
    const failing = {
      async generate() {
        throw Object.assign(new Error("bad key"), { statusCode: 401 });
      },
    };
    await record({ model: failing }, journal);
    expect((await replay(journal)).result).toMatchObject({ ended: "interrupted (model-error)", turns: 0 });
  });

  it("a compacted run: archived outputs are read back from the run's journal", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-replay-"));
    const journal = openSqliteJournal(join(dir, "loom.db"));
    try {
      await record({}, journal);
      const moved = await compact(journal, "r", { keepTurns: 0 });
      expect(moved.frameIds.length).toBeGreaterThan(0);
      expect((await replay(journal)).result).toEqual({ ended: "completed", turns: 4, matching: 3, of: 3, subRuns: [] });
    } finally {
      await journal.close();
    }
  });

  it("a cancelled run ends cancelled: mid-tool through the chart's cancel path, or after the wait it stood in", async () => {
    // Cancelled while its second tool ran: the walk serves turn 0, reaches the unfinished call, and
    // stops there the way cancelRun stopped the run, with the recorded reason.
    const running = createJournal({ store: memoryStore() });
    let started!: () => void;
    const reached = new Promise<void>((resolve) => {
      started = resolve;
    });
    let n = 0;
    const slow: Tool = {
      description: "hangs on its second call",
      execute: (input, { signal }) =>
        ++n === 1
          ? Promise.resolve({ found: input })
          : new Promise((_, reject) => {
              started();
              signal.addEventListener("abort", () => reject(signal.reason));
            }),
    };
    const loop = agentLoop$({
      id: "rec",
      model: scriptedModel(({ turn }) =>
        turn < 3
          ? { toolCalls: [{ id: `c${turn}`, name: "lookup", input: { turn } }] }
          : { content: "done", toolCalls: [] },
      ),
      tools: { lookup: slow },
    });
    const run = loop.run({ runId: "r", input: "go", journal: running, ownership: { leaseMs: 300 } }).catch((e) => e);
    await reached;
    expect((await cancelRun(running, "r", { reason: "operator stop", waitMs: 5_000 })).status).toBe("cancelled");
    expect(isRunCancelledError(await run)).toBe(true);
    const mid = await replay(running);
    expect(mid.result).toMatchObject({ ended: "cancelled (operator stop)", matching: 1, of: 1 });
    expect(mid.after).toBe(mid.entriesBefore);

    // Cancelled while it waited for an approval: the walk ends at the approval, then says so.
    const asked = createJournal({ store: memoryStore() });
    await record({ tools: { lookup: { ...lookup({ n: 0 }), requiresApproval: true } } }, asked, {
      "rec#turn:0:tool:0": true,
    });
    await cancelRun(asked, "r", { reason: "not needed" });
    expect((await replay(asked)).result).toMatchObject({
      ended: "interrupted (approval-pending), then cancelled (not needed)",
      matching: 1,
    });
  });
});

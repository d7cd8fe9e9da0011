import { describe, expect, it } from "vitest";
import { memoryArchive } from "../../src/events/archive.ts";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { BlobStore, Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { rebuildToolCallLog, resolveStep } from "../../src/runtime/base/readers.ts";
import {
  forkRun,
  isRunControlError,
  listPendingApprovals,
  recordApproval,
} from "../../src/runtime/control/operations.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { approvalLoop, REFUND_STEP } from "./workers/approvalLoop.ts";

const rejection = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e,
  );

/** Three turns of `look` (its output `version` tells which tool code ran), then an answer. */
function lookLoop(version: string, blobs?: BlobStore) {
  const calls: string[] = [];
  const model = scriptedModel(({ turn, messages }) => {
    if (turn < 3) return { toolCalls: [{ id: `c${turn}`, name: "look", input: { n: turn } }] };
    const outputs = messages.filter((m) => m.role === "tool").map((m) => (m.role === "tool" ? m.output : null));
    return { content: JSON.stringify(outputs.map((o) => (o as { v: string }).v)), toolCalls: [] };
  });
  const loop = agentLoop$({
    id: "look",
    model,
    tools: {
      look: {
        description: "looks",
        execute: (_input, { stepId }) => {
          calls.push(stepId);
          return { v: version, pad: "x".repeat(300) };
        },
      },
    },
    ...(blobs ? { claimCheck: { blobs, thresholdBytes: 100 } } : {}),
  });
  return { loop, calls };
}

const journalWith = (): Journal => createJournal({ store: memoryStore({ json: true }), archive: memoryArchive() });

describe("forkRun", () => {
  it("forks a completed run at a step: the new run runs that step again, the source is untouched", async () => {
    const journal = journalWith();
    const first = lookLoop("v1");
    expect((await first.loop.run({ runId: "src", journal, input: "go" })).content).toBe('["v1","v1","v1"]');
    const source = JSON.stringify(await readJournal(journal, "src"));

    const forked = await forkRun(journal, "src", { at: "look#turn:1:tool:0", newRunId: "fork" });
    expect(forked.forkedFrom).toMatchObject({ runId: "src", stepId: "look#turn:1:tool:0" });
    const [started] = await readJournal(journal, "fork");
    expect(started).toMatchObject({ type: "run.started", data: { forkedFrom: forked.forkedFrom } });

    const second = lookLoop("v2");
    expect((await second.loop.run({ runId: "fork", journal })).content).toBe('["v1","v2","v2"]');
    expect(second.calls).toEqual(["look#turn:1:tool:0", "look#turn:2:tool:0"]);
    expect(JSON.stringify(await readJournal(journal, "src"))).toBe(source);

    // At a seq: the entries before it, as a crash there would have left the run.
    const bySeq = await forkRun(journal, "src", { at: 2, newRunId: "fork-seq" });
    expect(bySeq.entries).toBe(1);
    expect((await lookLoop("v3").loop.run({ runId: "fork-seq", journal })).content).toBe('["v3","v3","v3"]');
  });

  it("forks a compacted, claim-checked run with every output resolvable", async () => {
    const blobs = memoryBlobStore();
    const journal = createJournal({ store: memoryStore({ json: true }), archive: memoryArchive(), blobs });
    await lookLoop("v1", blobs).loop.run({ runId: "src", journal, input: "go" });
    await compact(journal, "src", { keepTurns: 1 });
    const hot = await readJournal(journal, "src");
    expect(hot.some((e) => e.type === "frames.archived")).toBe(true);

    await forkRun(journal, "src", { at: "look#turn:3:model", newRunId: "fork" });
    const copy = await readJournal(journal, "fork");
    expect(copy.some((e) => e.type === "frames.archived")).toBe(false); // archived frames put back
    expect(copy.filter((e) => e.type === "frame.completed" && "claimChecked" in e.data).length).toBe(3);
    const full = await rebuildToolCallLog(journal, "fork", "lean");
    const outputs = await Promise.all(full.map((s) => resolveStep(journal, s.stepId, { runId: "fork" })));
    expect(outputs.map((o) => (o.output as { v: string }).v)).toEqual(["v1", "v1", "v1"]);
    const again = lookLoop("v2", blobs);
    expect((await again.loop.run({ runId: "fork", journal })).content).toBe('["v1","v1","v1"]');
    expect(again.calls).toEqual([]);
  });

  it("forks an interrupted run: the fork's approval is its own", async () => {
    const journal = journalWith();
    const { loop } = approvalLoop();
    await rejection(loop.run({ runId: "src", journal, input: "refund" }));
    const last = (await readJournal(journal, "src")).at(-1)?.seq ?? 0;
    await forkRun(journal, "src", { at: last + 1, newRunId: "fork" });
    expect((await listPendingApprovals(journal)).map((p) => p.runId).sort()).toEqual(["fork", "src"]);
    await recordApproval(journal, "fork", REFUND_STEP, { approved: true });
    const resumed = approvalLoop();
    expect((await resumed.loop.run({ runId: "fork", journal })).content).toBe('tool said {"refunded":500}');
    expect((await listPendingApprovals(journal)).map((p) => p.runId)).toEqual(["src"]);
  });

  it("refuses an unknown source, an unknown step and an existing target", async () => {
    const journal = journalWith();
    await lookLoop("v1").loop.run({ runId: "src", journal, input: "go" });
    const codes = await Promise.all([
      rejection(forkRun(journal, "nope", { at: 2, newRunId: "x" })),
      rejection(forkRun(journal, "src", { at: "look#turn:9:model", newRunId: "x" })),
      rejection(forkRun(journal, "src", { at: 1, newRunId: "x" })),
      rejection(forkRun(journal, "src", { at: 2, newRunId: "src" })),
    ]);
    expect(codes.map((e) => isRunControlError(e) && e.code)).toEqual([
      "runNotFound",
      "forkPointNotFound",
      "forkPointNotFound",
      "runExists",
    ]);
    expect(await readJournal(journal, "x")).toEqual([]);
  });
});

import { describe, expect, it } from "vitest";
import { AgentLoopConfigError, isRunFailedError } from "../../src/core/errors.ts";
import { readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import { chartStateOf } from "../../src/machines/chartState.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import { runViewOf } from "../../src/read/runView.ts";
import { runStory } from "../../src/read/story.ts";
import type { AgentLoopConfig, Tool } from "../../src/runtime/base/config.ts";
import { foldRun } from "../../src/runtime/base/readers.ts";
import { runActivity } from "../../src/runtime/control/activity.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { followRun } from "../../src/runtime/streaming/follow.ts";
import { jsonJournal } from "../support/loop.ts";

/**
 * The chart owns every ending (issue 35): a run that fails for good journals `run.failed` through
 * the one ending actor, readers show it failed, and a later `loop.run` reports it without running.
 */

const rejection = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e,
  );

const refund: Tool = { description: "refunds an order", requiresApproval: true, execute: async () => "refunded" };

/** A loop whose one call needs an approval, asked of `approve`. */
function loopWith(approve: AgentLoopConfig["approve"]) {
  const model = scriptedModel([
    { toolCalls: [{ id: "c1", name: "refund", input: { order: 7 } }] },
    { content: "Refunded.", toolCalls: [] },
  ]);
  return { loop: agentLoop$({ id: "shop", model, tools: { refund }, approve }) };
}

const lastEntry = async (journal: Journal, runId: string) => (await readJournal(journal, runId)).at(-1);

describe("a run that fails for good", () => {
  it("journals run.failed as its last entry when a hook throws an error Loom did not expect; run() rejects with it", async () => {
    const journal = jsonJournal();
    const { loop } = loopWith(() => {
      throw new TypeError("approve hook is broken");
    });
    const e = await rejection(loop.run({ runId: "f1", journal, input: "refund order 7" }));
    expect(e).toBeInstanceOf(TypeError);
    expect((e as Error).message).toBe("approve hook is broken");
    const last = await lastEntry(journal, "f1");
    expect(last?.type).toBe("run.failed");
    expect(last?.data).toEqual({ error: { name: "TypeError", message: "approve hook is broken" } });
  });

  it("is shown failed by the run state fold, runActivity and followRun", async () => {
    const journal = jsonJournal();
    const { loop } = loopWith(() => {
      throw new Error("boom");
    });
    await rejection(loop.run({ runId: "f2", journal, input: "refund order 7" }));
    const state = await foldRun(journal, "f2");
    expect(state.status).toBe("failed");
    expect(state.error).toEqual({ name: "Error", message: "boom" });
    expect((await runActivity(journal, "f2")).activity).toBe("failed");
    // What `loom show` tells and the viewer's view of the run.
    const entries = await readJournal(journal, "f2");
    expect((await runStory(journal, "f2", entries)).ended).toEqual({
      type: "failed",
      error: { name: "Error", message: "boom" },
    });
    const view = runViewOf(foldEntries(entries));
    expect(view.status).toBe("failed");
    expect(view.chart).toBe("failed");
    expect(chartStateOf(foldEntries(entries))).toBe("failed");
    const events = [];
    for await (const event of followRun(journal, "f2")) events.push(event);
    expect(events.at(-1)).toMatchObject({ type: "run-failed", runId: "f2", error: { name: "Error", message: "boom" } });
  });

  it("is reported again by a later run() with RunFailedError, running nothing (the journal is unchanged)", async () => {
    const journal = jsonJournal();
    const broken = loopWith(() => {
      throw new Error("boom");
    });
    await rejection(broken.loop.run({ runId: "f3", journal, input: "refund order 7" }));
    const before = await readJournal(journal, "f3");
    const fixed = loopWith(() => true);
    const e = await rejection(fixed.loop.run({ runId: "f3", journal }));
    expect(isRunFailedError(e)).toBe(true);
    expect(e).toMatchObject({ code: "runFailed", runId: "f3", recorded: { name: "Error", message: "boom" } });
    expect(await readJournal(journal, "f3")).toEqual(before);
  });
});

describe("what is not a failure of the run", () => {
  it("a LoomError (a refusal that says what to fix) journals no run.failed: the run resumes once fixed", async () => {
    const journal = jsonJournal();
    const refusing = loopWith(() => {
      throw new AgentLoopConfigError("approve: the approvals service is not configured");
    });
    const e = await rejection(refusing.loop.run({ runId: "n1", journal, input: "refund order 7" }));
    expect(e).toBeInstanceOf(AgentLoopConfigError);
    const entries = await readJournal(journal, "n1");
    expect(entries.map((entry) => entry.type)).not.toContain("run.failed");
    const fixed = loopWith(() => true);
    const output = await fixed.loop.run({ runId: "n1", journal });
    expect(output.content).toBe("Refunded.");
  });

  it("an error before the run is prepared (a new run without input) journals nothing at all", async () => {
    const journal = jsonJournal();
    const { loop } = loopWith(() => true);
    await rejection(loop.run({ runId: "n2", journal }));
    expect(await readJournal(journal, "n2")).toEqual([]);
  });
});

/**
 * The tool-call log as the real loop returns it (agentLoop$, a scripted model, a JSON memory
 * journal): it is the projection of the journal, in the run's shape, at every point of the run.
 */
import { describe, expect, it } from "vitest";
import { digestOf } from "../../src/core/digest.ts";
import { isAgentLoopConfigError } from "../../src/core/errors.ts";
import { memoryArchive } from "../../src/events/archive.ts";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { isLeanAgentStep } from "../../src/projections/toolCallLog.ts";
import type { LeanAgentStep, ToolCallLogMode } from "../../src/projections/types.ts";
import type { AgentLoopConfig, Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { rebuildToolCallLog, resolveStep } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

class Money {
  constructor(readonly cents: number) {}
  toJSON() {
    return { amount: this.cents / 100, currency: "EUR" };
  }
}

/** Live outputs whose recorded (JSON) form differs from the live value. */
const LIVE: Record<string, unknown> = {
  date: { at: new Date(86_400_000) },
  money: new Money(1999),
  map: { seen: new Map([["a", 1]]), n: 3 },
  big: { text: "x".repeat(3000) },
};

const tools: Record<string, Tool> = {
  lookup: { description: "returns a live value", execute: (input) => LIVE[(input as { key: string }).key] },
  flaky: {
    description: "throws",
    execute: () => {
      throw new TypeError("flaky failed");
    },
  },
  deploy: { description: "needs approval", requiresApproval: true, execute: () => ({ deployed: true }) },
};

/** Turn 0: lookup date, money, flaky; turn 1: deploy (approval), lookup map, big; turn 2: answer. */
const script = () =>
  scriptedModel([
    {
      toolCalls: [
        { id: "a", name: "lookup", input: { key: "date" } },
        { id: "b", name: "lookup", input: { key: "money" } },
        { id: "c", name: "flaky", input: {} },
      ],
    },
    {
      toolCalls: [
        { id: "d", name: "deploy", input: { env: "prod" } },
        { id: "e", name: "lookup", input: { key: "map" } },
        { id: "f", name: "lookup", input: { key: "big" } },
      ],
    },
    { content: "done", toolCalls: [] },
  ]);

const journalOf = () =>
  createJournal({ store: memoryStore({ json: true }), archive: memoryArchive(), blobs: memoryBlobStore() });

const loopOf = (mode: ToolCallLogMode | undefined, extra: Partial<AgentLoopConfig> = {}) =>
  agentLoop$({
    id: "shop",
    model: script(),
    tools,
    ...(mode ? { toolCallLog: mode } : {}),
    ...extra,
  });

const interrupted = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected an interruption");
    },
    (e: unknown) => {
      if (!isAgentInterruptedError(e)) throw e;
      return e.run;
    },
  );

async function runToEnd(journal: Journal, mode: ToolCallLogMode | undefined, extra: Partial<AgentLoopConfig> = {}) {
  const approve = () => false; // deploy is declined: a refusal fed back as an error
  return loopOf(mode, { approve, ...extra }).run({ runId: "r", journal, input: "go" });
}

describe("the loop's log is the projection of its journal", () => {
  for (const mode of ["full", "lean"] as const) {
    it(`a completed ${mode} run: rebuildToolCallLog equals the returned log, which run.completed does not repeat`, async () => {
      const journal = journalOf();
      const out = await runToEnd(journal, mode);
      expect(out.toolCallLog).toHaveLength(6);
      expect(out.toolCallLog.every((s) => isLeanAgentStep(s) === (mode === "lean"))).toBe(true);
      expect(await rebuildToolCallLog(journal, "r", mode)).toEqual(out.toolCallLog);
      const completed = (await readJournal(journal, "r")).find((e) => e.type === "run.completed");
      expect(completed?.data.output).toEqual({ content: out.content, iterations: out.iterations });
      // Run again: the completed run returns the same value, rebuilt from the journal, and appends nothing.
      const version = (await readJournal(journal, "r")).length;
      expect(await runToEnd(journal, mode)).toEqual(out);
      expect(await readJournal(journal, "r")).toHaveLength(version);
    });
  }

  it("lean status is the isError the model was fed: ok, ok, the failed tool, the declined approval, ok, ok", async () => {
    const out = await runToEnd(journalOf(), "lean");
    expect((out.toolCallLog as LeanAgentStep[]).map((s) => s.status)).toEqual([
      "ok",
      "ok",
      "error",
      "error",
      "ok",
      "ok",
    ]);
  });

  it("lean digests equal digestOf the live outputs (Date, toJSON class, Map), and the rebuilt full outputs' (D2)", async () => {
    const journal = journalOf();
    const out = (await runToEnd(journal, "lean")).toolCallLog as LeanAgentStep[];
    const full = await rebuildToolCallLog(journal, "r", "full");
    expect(out[0]?.digest).toBe(digestOf(LIVE.date).digest);
    expect(out[1]?.digest).toBe(digestOf(LIVE.money).digest);
    expect(out[4]?.digest).toBe(digestOf(LIVE.map).digest);
    out.forEach((lean, k) => {
      expect({ digest: lean.digest, bytes: lean.bytes }).toEqual(digestOf(full[k]?.toolOutput));
    });
  });

  it("with the claim-check on, the full log keeps the envelope, the lean digest covers it, and resolveStep reads the blob", async () => {
    const journal = journalOf();
    const blobs = journal.blobs as NonNullable<Journal["blobs"]>;
    const out = await runToEnd(journal, "lean", { claimCheck: { blobs, thresholdBytes: 1024 } });
    const full = await rebuildToolCallLog(journal, "r", "full");
    const envelope = full[5]?.toolOutput as { __loomClaimCheck: number; ref: string };
    expect(envelope.__loomClaimCheck).toBe(1);
    const lean = out.toolCallLog[5] as LeanAgentStep;
    expect(lean.digest).toBe(digestOf(envelope).digest);
    const step = await resolveStep(journal, lean.stepId, { runId: "r" });
    expect(step).toMatchObject({ source: "frame", output: LIVE.big, digest: lean.digest, claimCheck: envelope });
  });

  it("resolveStep returns every lean entry's full output, from the frame or, after compaction, the archive", async () => {
    const journal = journalOf();
    const out = (await runToEnd(journal, "lean")).toolCallLog as LeanAgentStep[];
    const full = await rebuildToolCallLog(journal, "r", "full");
    await compact(journal, "r", { keepTurns: 0 });
    expect(await rebuildToolCallLog(journal, "r", "lean")).toEqual(out);
    for (const [k, entry] of out.entries()) {
      const step = await resolveStep(journal, entry.stepId, { runId: "r" });
      expect(step.output).toEqual(full[k]?.toolOutput);
      expect(step.digest).toBe(entry.digest);
    }
    expect((await resolveStep(journal, out[0]?.stepId as string, { runId: "r" })).source).toBe("archive");
  });
});

describe("interrupted and resumed runs (D3, D4)", () => {
  it("the interrupted payload's log has the run's shape and equals the log rebuilt at that point", async () => {
    for (const mode of ["full", "lean"] as const) {
      const journal = journalOf();
      const run = await interrupted(
        loopOf(mode, { approve: () => "pending" }).run({ runId: "r", journal, input: "go" }),
      );
      expect(run.reason).toBe("approval-pending");
      expect(run.pendingApprovals.map((p) => p.stepId)).toEqual(["shop#turn:1:tool:0"]);
      expect(run.toolCallLog.every((s) => isLeanAgentStep(s) === (mode === "lean"))).toBe(true);
      expect(run.toolCallLog.some((s) => isLeanAgentStep(s) && s.stepId === "shop#turn:1:tool:0")).toBe(false);
      expect(await rebuildToolCallLog(journal, "r", mode)).toEqual(run.toolCallLog);
    }
  });

  it("a resumed run returns the same log as an uninterrupted one, and its digests match the live outputs", async () => {
    const straight = await runToEnd(journalOf(), "lean");
    const journal = journalOf();
    await interrupted(loopOf("lean", { approve: () => "pending" }).run({ runId: "r", journal, input: "go" }));
    const resumed = await loopOf("lean").run({ runId: "r", journal, approvals: { "shop#turn:1:tool:0": false } });
    expect(resumed.toolCallLog).toEqual(straight.toolCallLog);
  });

  it("a completed run takes no late pin: configured lean raises before any append; full and unset read it", async () => {
    const journal = journalOf();
    const out = await runToEnd(journal, undefined);
    const length = (await readJournal(journal, "r")).length;
    const error = await loopOf("lean")
      .run({ runId: "r", journal })
      .catch((e: unknown) => e);
    expect(isAgentLoopConfigError(error)).toBe(true);
    expect((error as Error).message).toMatch(/^run r \(loop shop\) recorded toolCallLog "full" .*configured "lean"/);
    expect((await readJournal(journal, "r")).length).toBe(length);
    expect(await loopOf("full").run({ runId: "r", journal })).toEqual(out);
    expect(await loopOf(undefined).run({ runId: "r", journal })).toEqual(out);
    expect((await readJournal(journal, "r")).length).toBe(length);
    // Either shape can still be rebuilt from the journal.
    expect(await rebuildToolCallLog(journal, "r", "lean")).toHaveLength(6);
  });
});

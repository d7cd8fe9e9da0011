import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { compact } from "../../src/events/compact.ts";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import type { BlobStore, Journal } from "../../src/events/spi.ts";
import type { Message } from "../../src/events/types.ts";
import type { Model, ModelResponse } from "../../src/models/types.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { rebuildToolCallLog, resolveStep } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";

/**
 * A tool output that merely looks like a claim-check envelope (`{ __loomClaimCheck: 1, ref, size,
 * digest }`, here naming another run's blob: a secret) is plain data wherever it is read: fed back
 * as itself after a resume from a reopened file, returned as itself by resolveStep, the rebuilt log
 * and `loom show` (never "verified" by the blob's hash), also once compacted into the archive. An
 * envelope the runtime wrote (marked in the frame, beside the output) still resolves everywhere.
 */

const SECRET = `the launch code is ${"7".repeat(400)}`;
const THRESHOLD = 256;

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-forged-envelope-");
});
afterAll(() => tmp.remove());

/** A model that asks for `tool` once, then answers; it keeps every conversation it was given. */
function modelCalling(tool: string): Model & { seen: Message[][] } {
  const seen: Message[][] = [];
  return {
    seen,
    async generate({ messages }): Promise<ModelResponse> {
      seen.push([...messages]);
      const turn = messages.filter((m) => m.role === "assistant").length;
      return turn === 0 ? { toolCalls: [{ id: "c0", name: tool, input: {} }] } : { content: "done", toolCalls: [] };
    },
  };
}

function loopOf(model: Model, blobs: BlobStore, output: () => unknown, maxIterations?: number) {
  return agentLoop$({
    id: "l",
    model,
    tools: { read: { description: "reads a document", execute: output } },
    claimCheck: { blobs, thresholdBytes: THRESHOLD },
    ...(maxIterations ? { maxIterations } : {}),
  });
}

/** Runs one model call and its tool, then stops (max-iterations) before the next model call. */
async function recordUntilToolDone(journal: Journal, runId: string, output: () => unknown): Promise<void> {
  const stopped = await loopOf(modelCalling("read"), journal.blobs as BlobStore, output, 1)
    .run({ runId, input: "go", journal })
    .catch((e: unknown) => e);
  if (!isAgentInterruptedError(stopped)) throw stopped;
}

/** What the model was fed for the one tool call, on the resume. */
async function resumeAndCaptureFed(path: string, runId: string, output: () => unknown) {
  const journal = openSqliteJournal(path);
  try {
    const model = modelCalling("read");
    const out = await loopOf(model, journal.blobs as BlobStore, output).run({ runId, journal });
    expect(out.content).toBe("done");
    const tool = model.seen[0]?.find((m) => m.role === "tool") as Extract<Message, { role: "tool" }>;
    return { fed: tool.output, conversation: JSON.stringify(model.seen) };
  } finally {
    await journal.close();
  }
}

async function show(path: string, runId: string, stepId: string) {
  let out = "";
  const io = { stdout: { write: (t: string) => (out += t) }, stderr: { write: () => {} }, cwd: tmp.dir };
  const code = await main(["show", stepId, "--run", runId, "--db", path, "--json"], io);
  expect(code).toBe(0);
  return JSON.parse(out) as { output: unknown; verified: string[]; claimCheck?: unknown };
}

describe("forged claim-check envelopes are plain data; the runtime's own still resolve", () => {
  const path = () => tmp.file("forged.db");
  let forged: Record<string, unknown>;

  it("the victim's claim-checked secret resolves after a resume (the runtime's own envelope)", async () => {
    const journal = openSqliteJournal(path());
    try {
      await recordUntilToolDone(journal, "victim", () => ({ secret: SECRET }));
      const completed = (await readJournal(journal, "victim")).find(
        (e) => e.type === "frame.completed" && e.data.frameId === "l#turn:0:tool:0",
      );
      // What an attacker copies (or guesses): the envelope of another run.
      forged = { ...((completed?.data as { output?: object } | undefined)?.output as Record<string, unknown>) };
      expect(forged).toMatchObject({ __loomClaimCheck: 1 });
      expect(completed?.data).toMatchObject({ claimChecked: true });
    } finally {
      await journal.close();
    }
    const { fed } = await resumeAndCaptureFed(path(), "victim", () => ({ secret: SECRET }));
    expect(fed).toEqual({ secret: SECRET });
  });

  it("a tool returning a copy of that envelope feeds the copy, never the blob, after a resume from a reopened file", async () => {
    const journal = openSqliteJournal(path());
    try {
      await recordUntilToolDone(journal, "attacker", () => forged);
    } finally {
      await journal.close();
    }
    const { fed, conversation } = await resumeAndCaptureFed(path(), "attacker", () => forged);
    expect(fed).toEqual(forged);
    expect(conversation).not.toContain("launch code");
  });

  it("resolveStep, the rebuilt log and loom show give the forged envelope back as data, unverified by any blob", async () => {
    const step = "l#turn:0:tool:0";
    const journal = openSqliteJournal(path());
    try {
      const resolved = await resolveStep(journal, step, { runId: "attacker" });
      expect(resolved.output).toEqual(forged);
      expect(resolved.claimCheck).toBeUndefined();
      expect((await rebuildToolCallLog(journal, "attacker", "full"))[0]?.toolOutput).toEqual(forged);
      const genuine = await resolveStep(journal, step, { runId: "victim" });
      expect(genuine.output).toEqual({ secret: SECRET });
      expect(genuine.claimCheck).toEqual(forged);
    } finally {
      await journal.close();
    }
    const shown = await show(path(), "attacker", step);
    expect(shown.output).toEqual(forged);
    expect(shown.claimCheck).toBeUndefined();
    expect(shown.verified.join("; ")).not.toMatch(/blob|claim-check/);
    expect(JSON.stringify(shown)).not.toContain("launch code");
    const real = await show(path(), "victim", step);
    expect(real.output).toEqual({ secret: SECRET });
    expect(real.verified.join("; ")).toContain("the blob's sha256 in its claim-check envelope");
  });

  it("stays plain data once compacted into the archive; the runtime's own envelope still resolves from there", async () => {
    const step = "l#turn:0:tool:0";
    const journal = openSqliteJournal(path());
    try {
      await compact(journal, "attacker", { keepTurns: 0 });
      await compact(journal, "victim", { keepTurns: 0 });
      const resolved = await resolveStep(journal, step, { runId: "attacker" });
      expect(resolved).toMatchObject({ source: "archive", output: forged });
      expect(resolved.claimCheck).toBeUndefined();
      expect((await rebuildToolCallLog(journal, "attacker", "full"))[0]?.toolOutput).toEqual(forged);
      expect(await resolveStep(journal, step, { runId: "victim" })).toMatchObject({
        source: "archive",
        output: { secret: SECRET },
      });
    } finally {
      await journal.close();
    }
    const shown = await show(path(), "attacker", step);
    expect(shown.output).toEqual(forged);
    expect(JSON.stringify(shown)).not.toContain("launch code");
    expect((await show(path(), "victim", step)).output).toEqual({ secret: SECRET });
  });
});

/**
 * The readers that await a journal (src/runtime/base/readers.ts), against real stores: a JSON memory
 * store, the memory archive and blob store, and `compact`.
 */
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/core/canonicalJson.ts";
import { digestOf } from "../../src/core/digest.ts";
import { isIntegrityError } from "../../src/core/errors.ts";
import { memoryArchive } from "../../src/events/archive.ts";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { ArchiveStore, BlobStore, Journal } from "../../src/events/spi.ts";
import type { NewEntry } from "../../src/events/types.ts";
import { completedOutput, isArchivedOutputError, projectToolCallLog } from "../../src/projections/toolCallLog.ts";
import {
  foldRun,
  hydrateArchived,
  isStepResolutionError,
  rebuildToolCallLog,
  resolveStep,
} from "../../src/runtime/base/readers.ts";
import { buildRun, type RunPlan } from "./runBuilder.ts";

class Money {
  constructor(readonly cents: number) {}
  toJSON() {
    return { amount: this.cents / 100, currency: "EUR" };
  }
}

/** An archive that counts its reads, and can alter what it returns. */
function spyArchive(inner: ArchiveStore, alter?: (output: unknown) => unknown) {
  let gets = 0;
  const archive: ArchiveStore = {
    put: (runId, frames) => inner.put(runId, frames),
    async get(ref) {
      gets++;
      const frames = await inner.get(ref);
      if (!alter) return frames;
      return frames.map(
        (f) =>
          ({
            ...f,
            completed: { ...f.completed, data: { ...f.completed.data, output: alter(f.completed.data.output) } },
          }) as typeof f,
      );
    },
    close: () => inner.close(),
  };
  return { archive, gets: () => gets };
}

const ENVELOPE_TEXT = { big: "x".repeat(64) };

async function journalFor(plan: RunPlan, options: { archive?: ArchiveStore; blobs?: BlobStore } = {}) {
  const journal = createJournal({
    store: memoryStore({ json: true }),
    archive: options.archive ?? memoryArchive(),
    ...(options.blobs ? { blobs: options.blobs } : {}),
  });
  const built = buildRun(plan);
  await append(journal, plan.runId, built.entries);
  return { journal, built };
}

async function append(journal: Journal, runId: string, entries: readonly NewEntry[], expectedVersion = 0) {
  // One append per entry, as the loop does: every prefix is a journal the readers must handle.
  for (let i = 0; i < entries.length; i++) {
    await journal.store.append(runId, [entries[i] as NewEntry], { expectedVersion: expectedVersion + i });
  }
}

const plan = (runId: string, extra: Partial<RunPlan> = {}): RunPlan => ({
  loopId: "support",
  runId,
  turns: [
    {
      calls: [
        {
          kind: "ok",
          name: "search",
          input: { q: "when" },
          output: { at: new Date(86_400_000), price: new Money(1234), seen: new Map([["a", 1]]) },
        },
        {
          kind: "failed",
          name: "fetch",
          input: { url: "x" },
          failure: { error: "TypeError", message: "fetch failed" },
        },
      ],
    },
    {
      calls: [
        {
          kind: "settled",
          name: "deploy",
          input: {},
          status: "error",
          reason: "approval-declined",
          result: { error: "approval-declined", message: "declined" },
        },
        { kind: "ok", name: "search", input: { q: "b" }, output: { hits: [1, 2, 3] } },
      ],
    },
    { calls: [{ kind: "ok", name: "search", input: { q: "c" }, output: "last" }] },
  ],
  complete: true,
  pin: "lean",
  ...extra,
});

describe("foldRun and rebuildToolCallLog", () => {
  it("folds a completed run: its recorded content and iterations, and its log rebuilt in either shape", async () => {
    const { journal } = await journalFor(plan("run-1"));
    const state = await foldRun(journal, "run-1");
    expect(state.status).toBe("completed");
    expect(state._output).toEqual({ content: "done", iterations: 4 });
    const lean = await rebuildToolCallLog(journal, "run-1", "lean");
    expect(lean.map((s) => s.stepId)).toEqual(
      ["0:tool:0", "0:tool:1", "1:tool:0", "1:tool:1", "2:tool:0"].map((s) => `support#turn:${s}`),
    );
    expect(completedOutput(state, "lean")).toEqual({ content: "done", toolCallLog: lean, iterations: 4 });
    expect(completedOutput(state, "full")?.toolCallLog).toEqual(await rebuildToolCallLog(journal, "run-1", "full"));
    expect(completedOutput(await foldRun(journal, "nothing-here"), "lean")).toBeUndefined();
  });

  it("digests equal the live outputs' (Date, toJSON class, Map) after a JSON store round trip (D2)", async () => {
    const { journal, built } = await journalFor(plan("run-2"));
    for (const entry of await rebuildToolCallLog(journal, "run-2", "lean")) {
      const live = built.fed.get(entry.stepId);
      expect({ digest: entry.digest, bytes: entry.bytes }).toEqual(digestOf(live?.output));
    }
  });

  it("rebuilds mid-run from every prefix of the journal: only the calls that ended appear", async () => {
    const p = plan("run-3", { complete: false });
    const built = buildRun(p);
    const journal = createJournal({ store: memoryStore({ json: true }) });
    const full = projectToolCallLog(await foldRunOf(p), "lean");
    for (let i = 0; i < built.entries.length; i++) {
      await journal.store.append("run-3", [built.entries[i] as NewEntry], { expectedVersion: i });
      const seq = i + 1;
      const lean = await rebuildToolCallLog(journal, "run-3", "lean");
      expect(lean).toEqual(full.filter((e) => (built.ends.get(e.stepId) ?? Infinity) <= seq));
    }
  });

  it("after compaction: lean reads no archive and is unchanged; full reads the outputs back, verified", async () => {
    const spy = spyArchive(memoryArchive());
    const { journal } = await journalFor(plan("run-4"), { archive: spy.archive });
    const lean = await rebuildToolCallLog(journal, "run-4", "lean");
    const full = await rebuildToolCallLog(journal, "run-4", "full");
    const { frameIds } = await compact(journal, "run-4", { keepTurns: 0 });
    expect(frameIds.length).toBeGreaterThan(0);
    const before = spy.gets();
    expect(await rebuildToolCallLog(journal, "run-4", "lean")).toEqual(lean);
    expect(spy.gets()).toBe(before);
    expect(await rebuildToolCallLog(journal, "run-4", "full")).toEqual(full);
    expect(spy.gets()).toBe(before + 1); // one read per archive batch
  });

  it("hydrateArchived puts archived outputs back so the full projection works on the folded state", async () => {
    const { journal } = await journalFor(plan("run-5"));
    const full = await rebuildToolCallLog(journal, "run-5", "full");
    await compact(journal, "run-5", { keepTurns: 1 });
    const state = await foldRun(journal, "run-5");
    expect(() => projectToolCallLog(state, "full")).toThrow(/hydrateArchived/);
    expect(projectToolCallLog(await hydrateArchived(journal, state), "full")).toEqual(full);
  });

  it("refuses an archive whose output no longer matches its marker's digest", async () => {
    const altered = spyArchive(memoryArchive(), (o) =>
      typeof o === "object" && o !== null ? { ...o, forged: true } : o,
    );
    const { journal } = await journalFor(plan("run-6"), { archive: altered.archive });
    await compact(journal, "run-6", { keepTurns: 0 });
    const error = await rebuildToolCallLog(journal, "run-6", "full").catch((e: unknown) => e);
    expect(isIntegrityError(error)).toBe(true);
    expect((error as Error).message).toMatch(
      /^run run-6: archived frame support#turn:0:tool:0 \(archive sha256:[0-9a-f]{64}\) hashes to .* restore it from a backup/,
    );
    // The lean log does not read the archive, so it still rebuilds.
    expect(await rebuildToolCallLog(journal, "run-6", "lean")).toHaveLength(5);
  });

  it("a full projection of a compacted state without hydration fails with the named error", async () => {
    const { journal } = await journalFor(plan("run-7"));
    await compact(journal, "run-7", { keepTurns: 0 });
    const error = await foldRun(journal, "run-7").then((s) => {
      try {
        return projectToolCallLog(s, "full");
      } catch (e) {
        return e;
      }
    });
    expect(isArchivedOutputError(error)).toBe(true);
  });

  it("rejects an invalid mode naming the loop", async () => {
    const { journal } = await journalFor(plan("run-8"));
    await expect(rebuildToolCallLog(journal, "run-8", "medium" as "lean")).rejects.toThrow(
      /loop support: toolCallLog is "medium"/,
    );
  });
});

async function foldRunOf(p: RunPlan) {
  const journal = createJournal({ store: memoryStore({ json: true }) });
  await append(journal, p.runId, buildRun(p).entries);
  return foldRun(journal, p.runId);
}

describe("resolveStep", () => {
  it("resolves each source to the output the model was fed, with the lean entry's digest", async () => {
    const { journal, built } = await journalFor(plan("run-10"));
    const lean = await rebuildToolCallLog(journal, "run-10", "lean");
    const sources = [];
    for (const entry of lean) {
      const step = await resolveStep(journal, entry.stepId, { runId: "run-10" });
      expect(step.digest).toBe(entry.digest);
      expect(step.bytes).toBe(entry.bytes);
      expect(step.status).toBe(entry.status);
      expect(step.output).toEqual(JSON.parse(JSON.stringify(built.fed.get(entry.stepId)?.output)));
      sources.push(step.source);
    }
    expect(sources).toEqual(["frame", "outcome", "settled", "frame", "frame"]);
  });

  it("resolves a compacted frame from the archive, verified", async () => {
    const { journal } = await journalFor(plan("run-11"));
    const lean = await rebuildToolCallLog(journal, "run-11", "lean");
    await compact(journal, "run-11", { keepTurns: 0 });
    const step = await resolveStep(journal, "support#turn:1:tool:1", { runId: "run-11" });
    expect(step).toMatchObject({
      source: "archive",
      status: "ok",
      output: { hits: [1, 2, 3] },
      digest: lean[3]?.digest,
    });
  });

  it("reads a claim-checked output from the blob store; the digest still covers the envelope", async () => {
    const blobs = memoryBlobStore();
    const bytes = new TextEncoder().encode(canonicalJson(ENVELOPE_TEXT));
    const info = await blobs.put(bytes);
    const envelope = { __loomClaimCheck: 1, ref: info.ref, size: info.size, digest: info.digest };
    const p = plan("run-12", {
      turns: [{ calls: [{ kind: "ok", name: "search", input: {}, output: envelope, claimChecked: true }] }],
    });
    const { journal } = await journalFor(p, { blobs });
    const [entry] = await rebuildToolCallLog(journal, "run-12", "lean");
    const step = await resolveStep(journal, "support#turn:0:tool:0");
    expect(step.output).toEqual(ENVELOPE_TEXT);
    expect(step.claimCheck).toEqual(envelope);
    expect(step.digest).toBe(entry?.digest);
    expect(step.digest).toBe(digestOf(envelope).digest);
    // Without a blob store the envelope is what there is.
    const bare = { store: journal.store };
    expect((await resolveStep(bare, "support#turn:0:tool:0")).output).toEqual(envelope);
  });

  it("refuses a blob that does not hash to its envelope's digest", async () => {
    const blobs = memoryBlobStore();
    const info = await blobs.put(new TextEncoder().encode('"real"'));
    const forged: BlobStore = { ...blobs, get: async () => new TextEncoder().encode('"forged"') };
    const envelope = { __loomClaimCheck: 1, ref: info.ref, size: info.size, digest: info.digest };
    const p = plan("run-13", {
      turns: [{ calls: [{ kind: "ok", name: "search", input: {}, output: envelope, claimChecked: true }] }],
    });
    const { journal } = await journalFor(p, { blobs: forged });
    const error = await resolveStep(journal, "support#turn:0:tool:0").catch((e: unknown) => e);
    expect(isIntegrityError(error)).toBe(true);
    expect((error as Error).message).toContain("run run-13: step support#turn:0:tool:0's blob");
  });

  it("names an unknown step, a step of several runs, and a step that has not ended", async () => {
    const { journal } = await journalFor(plan("run-14", { complete: false }));
    await append(journal, "run-15", buildRun(plan("run-15", { complete: false })).entries);
    const code = (p: Promise<unknown>) =>
      p.then(
        () => "resolved",
        (e: unknown) => (isStepResolutionError(e) ? e.code : String(e)),
      );
    expect(await code(resolveStep(journal, "support#turn:9:tool:0"))).toBe("unknownStep");
    expect(await code(resolveStep(journal, "support#turn:9:tool:0", { runId: "run-14" }))).toBe("unknownStep");
    expect(await code(resolveStep(journal, "support#turn:0:tool:0"))).toBe("ambiguousStep");
    expect(await code(resolveStep(journal, "support#turn:0:tool:0", { runId: "run-15" }))).toBe("resolved");

    const pending = plan("run-16", {
      complete: false,
      turns: [{ calls: [{ kind: "pending", name: "search", input: {}, started: true }] }],
    });
    const other = await journalFor(pending);
    const error = await resolveStep(other.journal, "support#turn:0:tool:0").catch((e: unknown) => e);
    expect(isStepResolutionError(error) && error.code).toBe("stepNotEnded");
    expect((error as Error).message).toMatch(/^run run-16: step support#turn:0:tool:0 has not ended/);
  });
});

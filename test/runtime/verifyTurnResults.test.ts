import { describe, expect, it } from "vitest";
import { isIntegrityError } from "../../src/core/errors.ts";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { modelFrameId, outcomeId } from "../../src/events/ids.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { BlobStore } from "../../src/events/spi.ts";
import type { NewEntry } from "../../src/events/types.ts";
import { foldEntries } from "../../src/projections/runState.ts";
import {
  foldRun,
  hydrateArchived,
  rebuildToolCallLog,
  resolveStep,
  verifyTurnResults,
} from "../../src/runtime/base/readers.ts";
import { kitchenSink } from "../support/kitchenSink.ts";

const TURNS = 6;

/** A completed kitchen-sink run: every call kind (refusals, failures, claim-checked outputs) in 6 turns. */
async function completedRun(blobs: BlobStore) {
  const journal = createJournal({ store: memoryStore({ json: true }), blobs });
  await kitchenSink({ turns: TURNS, mode: "lean", blobs }).loop.run({ runId: "r", journal, input: "go" });
  return journal;
}

describe("verifyTurnResults: the next model call's prompt digest vouches for what a turn fed back", () => {
  it("vouches for every turn of a completed run, whatever its calls did; nothing for the final answer", async () => {
    const journal = await completedRun(memoryBlobStore());
    const state = await hydrateArchived(journal, await foldRun(journal, "r"));
    for (let turn = 0; turn < TURNS; turn++) {
      expect(await verifyTurnResults(journal, state, turn)).toBe(modelFrameId("sink", turn + 1));
    }
    expect(await verifyTurnResults(journal, state, TURNS)).toBeUndefined();
  });

  /** The run's journal copied with one entry changed, folded. */
  async function alteredRun(change: (entry: NewEntry) => NewEntry, blobs: BlobStore = memoryBlobStore()) {
    const journal = await completedRun(blobs);
    const entries = (await readJournal(journal, "r")).map(({ type, data }) => change({ type, data } as NewEntry));
    const altered = createJournal({ store: memoryStore({ json: true }), blobs });
    await altered.store.append("r", entries, { expectedVersion: 0 });
    return { journal: altered, state: foldEntries(await readJournal(altered, "r")) };
  }

  it("refuses a failed tool's outcome decision edited after the fact", async () => {
    const failedStep = "sink#turn:0:tool:1"; // turn 0's second call is the failing tool
    const { journal, state } = await alteredRun((e) =>
      e.type === "decision.recorded" && e.data.decisionId === outcomeId(failedStep)
        ? { ...e, data: { ...e.data, choice: { failed: { error: "Error", message: "nothing went wrong" } } } }
        : e,
    );
    expect(state.decisions[outcomeId(failedStep)]).toBeDefined();
    const error = await verifyTurnResults(journal, state, 0).catch((e: unknown) => e);
    if (!isIntegrityError(error)) throw error;
    expect(error.message).toBe(
      "run r: what was fed back after model call 0 no longer hashes to the prompt digest sink#turn:1:model recorded; the journal was altered: restore it from a backup",
    );
    expect(await verifyTurnResults(journal, state, 1)).toBe("sink#turn:2:model"); // the other turns still verify
  });

  it("the lean log reads the digest each tool frame recorded (hashing nothing); resolveStep checks it against the output", async () => {
    const stepId = "sink#turn:1:tool:0"; // fetch, inline output
    const { journal } = await alteredRun((e) =>
      e.type === "frame.completed" && e.data.frameId === stepId
        ? { ...e, data: { ...e.data, digest: "f".repeat(64) } }
        : e,
    );
    const lean = await rebuildToolCallLog(journal, "r", "lean");
    expect(lean.find((s) => s.stepId === stepId)?.digest).toBe("f".repeat(64));
    await expect(resolveStep(journal, stepId, { runId: "r" })).rejects.toThrow(
      new RegExp(
        `^run r: step ${stepId}'s output hashes to [0-9a-f]{64} \\(\\d+ bytes\\), not the f{64} \\(\\d+ bytes\\) its frame recorded`,
      ),
    );
    const other = lean.find((s) => s.stepId === "sink#turn:2:tool:0");
    expect((await resolveStep(journal, "sink#turn:2:tool:0", { runId: "r" })).digest).toBe(other?.digest);
  });

  it("refuses a claim-checked output whose blob was swapped for other valid bytes (a store that does not check)", async () => {
    const inner = memoryBlobStore();
    const swapped = new Map<string, Uint8Array>();
    const blobs: BlobStore = { ...inner, get: async (ref) => swapped.get(ref) ?? inner.get(ref) };
    const { journal, state } = await alteredRun((e) => e, blobs);
    const envelope = state.frames["sink#turn:0:tool:0"]?.output as { ref: string };
    swapped.set(envelope.ref, Buffer.from(JSON.stringify({ page: 0, body: "another page" })));
    await expect(verifyTurnResults(journal, state, 0)).rejects.toThrow(/after model call 0 no longer hashes/);
  });
});

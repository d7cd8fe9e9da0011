import { memoryBlobStore } from "../../src/events/blobs.ts";
import { memoryDataKeys } from "../../src/events/dataKeys.ts";
import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { BlobStore } from "../../src/events/spi.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { Budget } from "../../src/policies/budget.ts";
import { compositionJournal, type Feature, memoryWorld, messagesOf, runIdOf } from "./composition.ts";
import { type CompositionReference, referenceOf, usageWithSubRuns } from "./compositionChecks.ts";
import { drive } from "./compositionDriver.ts";
import { crashingStore } from "./loop.ts";

/** A blob store that keeps a copy of every blob put, so a test can read the bytes it stored. */
function keptBlobs(inner: BlobStore): BlobStore & { readonly bytes: Uint8Array[] } {
  const bytes: Uint8Array[] = [];
  const put = (b: Uint8Array) => {
    bytes.push(Uint8Array.from(b));
    return inner.put(b);
  };
  return { ...inner, bytes, put };
}

/** A memory store and blob store the scenario's journals (one per "process") are made on. */
export function memoryBackend() {
  const store = memoryStore({ json: true });
  const blobs = keptBlobs(memoryBlobStore());
  const dataKeys = memoryDataKeys();
  const journalOn = (features: ReadonlySet<Feature>, over: EventStore = store) =>
    compositionJournal(createJournal({ store: over, blobs, dataKeys }), features);
  /** Everything the store and its blob store hold, as text (entries, snapshots, blob bytes). */
  const storedText = async () => {
    const parts: string[] = [];
    for (const { runId } of await store.listRuns()) {
      parts.push(JSON.stringify(await store.read(runId)));
      parts.push(JSON.stringify((await store.latestSnapshot?.(runId)) ?? null));
    }
    for (const b of blobs.bytes) parts.push(Buffer.from(b).toString("latin1"));
    return parts.join("\n");
  };
  return { store, journalOn, storedText };
}

/** What an uninterrupted run of the scenario did, to hold the others to. */
export interface Uninterrupted {
  readonly appends: number;
  /** Model calls, tool executions and drive steps: the places a kill can land. */
  readonly effects: number;
  /** What each message's run spent (with its sub-agents): the budget the others are held to. */
  readonly budgets: Budget[];
  readonly reference: CompositionReference;
}

/** The scenario run once on the memory store, never crashed. */
export async function uninterrupted(features: ReadonlySet<Feature>): Promise<Uninterrupted> {
  const backend = memoryBackend();
  const counting = crashingStore(backend.store, Number.POSITIVE_INFINITY);
  const journal = backend.journalOn(features, counting);
  let effects = 0;
  const world = memoryWorld();
  const counted = {
    ...world,
    executed: (runId: string, stepId: string) => {
      effects++;
      world.executed(runId, stepId);
    },
    modelCalled: () => effects++,
  };
  const outputs = await drive({
    features,
    world: counted,
    journal,
    budgetOf: () => undefined,
    onStep: () => effects++,
  });
  // What each message's run spent; in a session, what the session spent through that message (a
  // budget sent with a message holds for the whole session).
  const budgets: Budget[] = [];
  const spent = { modelCalls: 0, inputTokens: 0, outputTokens: 0 };
  for (let k = 0; k < messagesOf(features); k++) {
    const used = await usageWithSubRuns(journal, runIdOf(features, k));
    if (!features.has("session")) Object.assign(spent, { modelCalls: 0, inputTokens: 0, outputTokens: 0 });
    spent.modelCalls += used.modelCalls;
    spent.inputTokens += used.inputTokens;
    spent.outputTokens += used.outputTokens;
    budgets.push({ ...spent });
  }
  return { appends: counting.appends, effects, budgets, reference: await referenceOf(journal, features, outputs) };
}

import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { EventStore } from "../../src/events/store.ts";
import { postgresStore } from "../../src/postgres.ts";
import { parseFrameId } from "../../src/projections/ids.ts";
import type { ToolCallLogMode } from "../../src/projections/types.ts";
import { dropSchema, freshSchema, PG_URL } from "../postgres/pg.ts";
import { CALL_KINDS, kitchenSink } from "../support/kitchenSink.ts";
import { addCounts, crashingStore, frameProgress, logsOf, mapConcurrently } from "../support/loop.ts";

/**
 * A crash at every append point: a 20-turn run (three calls a turn, run concurrently: a tool
 * that fails, every refusal, a declined and an approved call, search_tools, a skill, an output
 * with no JSON form, claim-checked outputs) whose store fails after append k, for k = 0, 1, …
 * until the run completes without crashing. Each crashed run is resumed by a fresh loop object
 * (fresh tool counters) on the same store and blob store, and must end exactly as the
 * uninterrupted run did.
 */

const TURNS = 20;
const INPUT = "reconcile the ledger";

/** A store to crash on: a fresh run id (and store) per crash point. */
interface Backend {
  readonly name: string;
  fresh(label: string): Promise<{ store: EventStore; runId: string }>;
}

const memory: Backend = {
  name: "memory (JSON text)",
  fresh: async () => ({ store: memoryStore({ json: true }), runId: "r" }),
};

// A crashed attempt stops its actors while tool calls are still settling; xstate warns for each
// late event. Expected here, and hundreds of them would bury real output.
beforeAll(() => {
  const warn = console.warn.bind(console);
  vi.spyOn(console, "warn").mockImplementation((...args: unknown[]) => {
    if (typeof args[0] === "string" && /was sent to stopped actor/.test(args[0])) return;
    warn(...args);
  });
});
afterAll(() => {
  vi.restoreAllMocks();
});

interface Reference {
  readonly output: string;
  readonly full: string;
  readonly lean: string;
}

async function uninterrupted(backend: Backend, mode: ToolCallLogMode): Promise<Reference & { appends: number }> {
  const { store, runId } = await backend.fresh("reference");
  const counting = crashingStore(store, Number.POSITIVE_INFINITY);
  const journal = createJournal({ store });
  const { loop, executions } = kitchenSink({ turns: TURNS, mode, blobs: memoryBlobStore() });
  const output = JSON.stringify(await loop.run({ runId, input: INPUT, journal: createJournal({ store: counting }) }));
  for (const [stepId, n] of executions) expect(n, stepId).toBe(1);
  return { output, appends: counting.appends, ...(await logsOf(journal, runId)) };
}

/**
 * Crashes the run after `k` appends and resumes it. Returns true, or the appends the run made
 * when it completed without reaching a crash (k is past its last append point).
 */
async function crashAndResume(
  backend: Backend,
  mode: ToolCallLogMode,
  k: number,
  ref: Reference,
): Promise<true | number> {
  const at = `${backend.name}, ${mode}, crash after append ${k}`;
  const { store, runId } = await backend.fresh(`${mode}-${k}`);
  const blobs = memoryBlobStore(); // outlives the crash, like the store
  const first = kitchenSink({ turns: TURNS, mode, blobs });
  const crashing = crashingStore(store, k);
  const crashed = await first.loop.run({ runId, input: INPUT, journal: createJournal({ store: crashing }) }).then(
    () => undefined,
    (e: unknown) => e,
  );
  // Appends queued together go out as one, so a run can take fewer appends than the reference
  // (the slow and fast calls finish in another order): past its own last append it completes.
  if (crashed === undefined) return crashing.appends;
  expect(String((crashed as Error).message), at).toMatch(/simulated crash before append/);

  const journal = createJournal({ store });
  const atCrash = frameProgress(await readJournal(journal, runId)); // validates what the crash left

  const resumed = kitchenSink({ turns: TURNS, mode, blobs });
  const output = await resumed.loop.run({ runId, input: INPUT, journal });
  expect(JSON.stringify(output), at).toBe(ref.output);
  const logs = await logsOf(journal, runId);
  expect(logs.full, at).toBe(ref.full);
  expect(logs.lean, at).toBe(ref.lean);

  const final = frameProgress(await readJournal(journal, runId));
  expect(final.open.size, `${at}: frames left open`).toBe(0);
  const executions = addCounts(new Map(first.executions), resumed.executions);
  for (const frameId of final.completed) {
    const parsed = parseFrameId(frameId);
    if (parsed?.kind !== "tool") continue;
    const n = executions.get(frameId) ?? 0;
    if (atCrash.open.has(frameId)) {
      // Outcome unknown at the crash: retried once, with the same step id.
      expect(resumed.executions.get(frameId), `${at}: ${frameId} retried`).toBe(1);
      expect(n, `${at}: ${frameId}`).toBeLessThanOrEqual(2);
    } else {
      expect(n, `${at}: ${frameId} (completed at the crash: ${atCrash.completed.has(frameId)})`).toBe(1);
    }
  }
  for (const stepId of executions.keys()) expect(final.completed.has(stepId), `${at}: ran ${stepId}`).toBe(true);
  const openModel = [...atCrash.open].some((id) => parseFrameId(id)?.kind === "model") ? 1 : 0;
  expect(first.modelCalls + resumed.modelCalls, `${at}: model calls`).toBe(TURNS + 1 + openModel);
  return true;
}

/**
 * Crashes the run after each of its appends, `concurrency` crash points at a time (each on its
 * own run), then checks that a point past the end is: the run completes. Appends queued
 * together go out as one, so the count varies a little with the order concurrent calls finish in.
 */
async function everyCrashPoint(backend: Backend, mode: ToolCallLogMode, concurrency: number): Promise<number> {
  const ref = await uninterrupted(backend, mode);
  const n = ref.appends;
  const crashed = await mapConcurrently(n, concurrency, (k) => crashAndResume(backend, mode, k, ref));
  crashed.forEach((c, k) => {
    if (c !== true) expect(c, `a run not crashed after append ${k} made no more appends`).toBeLessThanOrEqual(k);
  });
  expect(crashed.filter((c) => c === true).length, "most append points crash the run").toBeGreaterThan(n * 0.9);
  const past = await crashAndResume(backend, mode, n + 3, ref);
  expect(past, `a crash after append ${n + 3}: the run completes first`).not.toBe(true);
  console.log(
    `crashPoints [${backend.name}, ${mode}]: ${n} crash points tried (after append 0..${n - 1} of ${n}), ${crashed.filter((c) => c === true).length} resumed byte-identical (output, full and lean logs), no completed tool run twice`,
  );
  return n;
}

// What write-ahead needs at least (results ride with the next append, appends queued together go
// out as one): run.started, each of the 21 model calls' frame.started, each turn's first tool
// frame.started (a fetch every turn, with the model's completion), run.completed.
const FLOOR = 1 + 21 + 20 + 1;

describe.each(["full", "lean"] as const)("a crash at every append point of a %s 20-turn run", (mode) => {
  it(`resumes each to the uninterrupted output and logs, runs no completed tool twice, and leaves a valid journal (${CALL_KINDS.length} call kinds)`, async () => {
    expect(await everyCrashPoint(memory, mode, 4)).toBeGreaterThanOrEqual(FLOOR);
  });
});

// Skipped without LOOM_PG_URL: there is no PostgreSQL server to crash against (`npm run test:pg`
// style: scripts/pg-test-cluster.sh run -- npx vitest run test/reliability/crashPoints.test.ts).
describe.skipIf(PG_URL === undefined)("the same crash points on PostgreSQL (LOOM_PG_URL)", () => {
  const schema = freshSchema("crash_points");
  const store = PG_URL === undefined ? undefined : postgresStore(PG_URL, { schema, pool: { max: 16 } });
  let runs = 0;
  const postgres: Backend = {
    name: "postgres",
    // One schema, a fresh run per crash point: the store is shared, as by the processes of a deployment.
    fresh: async (label) => ({ store: store!, runId: `${label}-${runs++}` }),
  };
  afterAll(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it.each(["full", "lean"] as const)(
    "%s: every crash point resumes to the uninterrupted output and logs",
    async (mode) => {
      expect(await everyCrashPoint(postgres, mode, 16)).toBeGreaterThanOrEqual(FLOOR);
    },
    600_000,
  );
});

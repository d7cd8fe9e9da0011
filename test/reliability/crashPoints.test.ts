import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { payloadCodec, staticKeys } from "../../src/events/codec/codec.ts";
import { codecBlobStore, codecStore } from "../../src/events/codec/codecStore.ts";
import { parseFrameId } from "../../src/events/ids.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { BlobStore } from "../../src/events/spi.ts";
import type { EventStore } from "../../src/events/store.ts";
import { postgresStore } from "../../src/postgres.ts";
import type { ToolCallLogMode } from "../../src/projections/types.ts";
import { dropSchema, freshSchema, PG_URL } from "../postgres/pg.ts";
import { CALL_KINDS, type FlakyWorld, failuresOf, flakyWorld, kitchenSink } from "../support/kitchenSink.ts";
import {
  addCounts,
  attemptsOf,
  crashingStore,
  type FrameAttempts,
  frameProgress,
  logsOf,
  mapConcurrently,
} from "../support/loop.ts";

/**
 * A crash at every append point: a 20-turn run (three calls a turn, run concurrently: a tool
 * that fails, every refusal, a declined and an approved call, search_tools, a skill, an output
 * with no JSON form, claim-checked outputs) whose store fails after append k, for k = 0, 1, …
 * until the run completes without crashing. Each crashed run is resumed by a fresh loop object
 * (fresh tool counters) on the same store and blob store, and must end exactly as the
 * uninterrupted run did.
 *
 * Retries are in play: the model fails retryably on some turns and `fetch` fails its first
 * attempts on others, both retried by their policies (kitchenSink's `flaky`, FLAKY_RETRY). The
 * flaky world outlives the crash like the store, so every count is exact: a crash during a
 * back-off goes on with the next attempt number, and an attempt whose outcome the crash lost is
 * run again under its own number.
 */

const TURNS = 20;
const INPUT = "reconcile the ledger";

/** A store to crash on: a fresh run id (and store) per crash point. */
interface Backend {
  readonly name: string;
  fresh(label: string): Promise<{ store: EventStore; runId: string }>;
  /** A fresh blob store (default: in memory). */
  blobs?(): BlobStore;
}

const memory: Backend = {
  name: "memory (JSON text)",
  fresh: async () => ({ store: memoryStore({ json: true }), runId: "r" }),
};

// The same store through the payload codec (issue 33): every payload compressed and encrypted,
// blobs too; the output and both logs must still come back byte-identical after each crash.
const codec = payloadCodec({
  compress: "gzip",
  minBytes: 1,
  encrypt: { keys: staticKeys({ current: "k1", keys: { k1: randomBytes(32) } }) },
});
const memoryCodec: Backend = {
  name: "memory (JSON text) + gzip + aes-256-gcm",
  fresh: async () => ({ store: codecStore(memoryStore({ json: true }), codec), runId: "r" }),
  blobs: () => codecBlobStore(memoryBlobStore(), codec),
};
const blobsOf = (backend: Backend) => backend.blobs?.() ?? memoryBlobStore();

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

/** 1, 2, …, n: a frame's failed attempts, numbered on across crashes, none twice. */
const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

const sum = (ns: Iterable<number>) => [...ns].reduce((a, b) => a + b, 0);

/** The frames whose effect the flaky world counts: the model and `fetch`. */
const isFlaky = (f: FrameAttempts) => f.effect === "model" || f.effect === "tool:fetch";

async function uninterrupted(backend: Backend, mode: ToolCallLogMode): Promise<Reference & { appends: number }> {
  const { store, runId } = await backend.fresh("reference");
  const counting = crashingStore(store, Number.POSITIVE_INFINITY);
  const journal = createJournal({ store });
  const world = flakyWorld();
  const sink = kitchenSink({ turns: TURNS, mode, blobs: blobsOf(backend), flaky: world });
  const output = JSON.stringify(
    await sink.loop.run({ runId, input: INPUT, journal: createJournal({ store: counting }) }),
  );
  // Each frame failed as often as the world says, its attempts numbered 1..F, then answered once.
  const frames = attemptsOf(await readJournal(journal, runId));
  for (const [frameId, f] of frames) {
    expect(f.failed, frameId).toEqual(upTo(failuresOf(frameId)));
    expect(f.started, frameId).toBe(failuresOf(frameId) + 1);
  }
  for (const [stepId, n] of sink.executions) expect(n, stepId).toBe(1 + failuresOf(stepId));
  const failures = (effect: string) =>
    sum([...frames].flatMap(([id, f]) => (f.effect === effect ? [failuresOf(id)] : [])));
  // The workload's flakiness: 6 model failures (turns 1, 6, 11, 16), 6 of fetch (turns 3, 8, 13, 18).
  expect([failures("model"), failures("tool:fetch")]).toEqual([6, 6]);
  expect(sink.modelCalls).toBe(TURNS + 1 + failures("model"));
  return { output, appends: counting.appends, ...(await logsOf(journal, runId)) };
}

/** Where one crash landed, for a frame with retries: what the harness went through. */
interface Landed {
  /** Frames waiting out a back-off at the crash (a failed attempt journaled, the next not started). */
  readonly backingOff: number;
  /** Frames whose failing attempt's outcome the crash lost. */
  readonly lostFailure: number;
}

/**
 * Crashes the run after `k` appends and resumes it. Returns where the crash landed, or the
 * appends the run made when it completed without reaching a crash (k is past its last append point).
 */
async function crashAndResume(
  backend: Backend,
  mode: ToolCallLogMode,
  k: number,
  ref: Reference,
): Promise<Landed | number> {
  const at = `${backend.name}, ${mode}, crash after append ${k}`;
  const { store, runId } = await backend.fresh(`${mode}-${k}`);
  const blobs = blobsOf(backend); // outlives the crash, like the store
  const world: FlakyWorld = flakyWorld(); // and so does the flaky world
  const first = kitchenSink({ turns: TURNS, mode, blobs, flaky: world });
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
  const left = await readJournal(journal, runId); // validates what the crash left
  const atCrash = frameProgress(left);
  const before = attemptsOf(left);

  const resumed = kitchenSink({ turns: TURNS, mode, blobs, flaky: world });
  const output = await resumed.loop.run({ runId, input: INPUT, journal });
  expect(JSON.stringify(output), at).toBe(ref.output);
  const logs = await logsOf(journal, runId);
  expect(logs.full, at).toBe(ref.full);
  expect(logs.lean, at).toBe(ref.lean);

  const ended = await readJournal(journal, runId);
  const final = frameProgress(ended);
  expect(final.open.size, `${at}: frames left open`).toBe(0);
  const executions = addCounts(new Map(first.executions), resumed.executions);
  let backingOff = 0;
  let lostFailure = 0;
  for (const [frameId, f] of attemptsOf(ended)) {
    const b = before.get(frameId);
    const failures = failuresOf(frameId);
    // An attempt whose outcome the crash lost is run again under its number; when the world had
    // failed it, its failure is not journaled and the rerun is the next call the world answers.
    const lost = b?.unknown ? 1 : 0;
    const lostFailed = lost === 1 && (b?.started ?? 0) <= failures ? 1 : 0;
    if (b !== undefined && b.failed.length > 0 && !b.unknown && !b.completed) backingOff++;
    lostFailure += lostFailed;
    expect(f.completed, `${at}: ${frameId} completed`).toBe(true);
    expect(f.failed, `${at}: ${frameId} attempt numbers (at the crash: ${b?.failed})`).toEqual(
      upTo(failures - lostFailed),
    );
    expect(f.started, `${at}: ${frameId} attempts run`).toBe(failures - lostFailed + 1 + lost);
    if (isFlaky(f)) expect(world.calls.get(frameId), `${at}: ${frameId} calls`).toBe(f.started);
    const parsed = parseFrameId(frameId);
    if (parsed?.kind !== "tool") continue;
    // Write-ahead, counted: a tool ran once for each journaled start, never beyond it.
    if (f.effect !== "tool:search_tools" && f.effect !== "tool:activate_skill") {
      expect(executions.get(frameId), `${at}: ${frameId} (${f.effect}) runs`).toBe(f.started);
    }
    if (b?.completed) {
      expect(resumed.executions.get(frameId), `${at}: ${frameId} completed at the crash, run again`).toBeUndefined();
    } else if (b?.unknown) {
      expect(resumed.executions.get(frameId), `${at}: ${frameId} outcome unknown, rerun`).toBeGreaterThanOrEqual(1);
    }
  }
  for (const frameId of atCrash.completed) expect(final.completed.has(frameId), `${at}: ${frameId}`).toBe(true);
  for (const stepId of executions.keys()) expect(final.completed.has(stepId), `${at}: ran ${stepId}`).toBe(true);
  const modelStarts = sum([...attemptsOf(ended).values()].flatMap((f) => (f.effect === "model" ? [f.started] : [])));
  expect(first.modelCalls + resumed.modelCalls, `${at}: model calls`).toBe(modelStarts);
  return { backingOff, lostFailure };
}

/**
 * Crashes the run after each of its appends, `concurrency` crash points at a time (each on its
 * own run), then one after the other past the reference's last append until a run completes
 * first. Appends queued together go out as one, so the count varies a little with the order
 * concurrent calls finish in.
 */
async function everyCrashPoint(backend: Backend, mode: ToolCallLogMode, concurrency: number): Promise<number> {
  const ref = await uninterrupted(backend, mode);
  const n = ref.appends;
  const landed = await mapConcurrently(n, concurrency, (k) => crashAndResume(backend, mode, k, ref));
  landed.forEach((c, k) => {
    if (typeof c === "number")
      expect(c, `a run not crashed after append ${k} made no more appends`).toBeLessThanOrEqual(k);
  });
  // Retries (with no wait) let the calls finish in more orders, so a run can take a few more
  // appends than the reference: crash after those too, until a run completes first.
  for (let k = n; ; k++) {
    expect(k, "a run that never completes").toBeLessThan(2 * n);
    const c = await crashAndResume(backend, mode, k, ref);
    if (typeof c === "number") break;
    landed.push(c);
  }
  const crashed = landed.filter((c): c is Landed => typeof c !== "number");
  expect(crashed.length, "most append points crash the run").toBeGreaterThan(n * 0.9);
  // The retries' crash points are reached: during a back-off, and with a failing attempt's outcome lost.
  const backingOff = crashed.filter((c) => c.backingOff > 0).length;
  const lostFailure = crashed.filter((c) => c.lostFailure > 0).length;
  expect(backingOff, "crashes during a back-off").toBeGreaterThan(0);
  expect(lostFailure, "crashes losing a failed attempt").toBeGreaterThan(0);
  console.log(
    `crashPoints [${backend.name}, ${mode}]: ${landed.length} crash points tried (the reference made ${n} appends), ${crashed.length} resumed byte-identical (output, full and lean logs), no completed tool run twice; ${backingOff} crashed during a back-off, ${lostFailure} lost a failed attempt's outcome`,
  );
  return n;
}

// What write-ahead needs at least (results ride with the next append, appends queued together go
// out as one): run.started, each of the 21 model calls' frame.started and each of their 6 retries'
// (nothing else runs meanwhile), each turn's first tool frame.started (a fetch every turn, with
// the model's completion), run.completed.
const FLOOR = 1 + (21 + 6) + 20 + 1;

describe.each(["full", "lean"] as const)("a crash at every append point of a %s 20-turn run", (mode) => {
  it.each([memory, memoryCodec])(
    `$name: resumes each to the uninterrupted output and logs, runs no completed tool twice, and leaves a valid journal (${CALL_KINDS.length} call kinds, retries in play)`,
    async (backend) => {
      expect(await everyCrashPoint(backend, mode, 4)).toBeGreaterThanOrEqual(FLOOR);
    },
  );
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

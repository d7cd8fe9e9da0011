import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { AgentOutput } from "../../src/projections/types.ts";
import { FEATURES, type Feature, memoryWorld, messagesOf, runIdOf, type World } from "../support/composition.ts";
import { checkInvariants, completedFrames, type Era, runsOf, usageWithSubRuns } from "../support/compositionChecks.ts";
import { budgetStops, drive } from "../support/compositionDriver.ts";
import { memoryBackend, type Uninterrupted, uninterrupted } from "../support/compositionMemory.ts";
import { seededRandom } from "../support/kitchenSink.ts";
import { crashingStore } from "../support/loop.ts";
import { KNOWN_GAPS } from "./compositionGaps.ts";

/**
 * The pairwise matrix: each pair of the composition scenario's features turned on together (and
 * every feature at once), on the memory store, crashed twice at seeded append points and resumed
 * by fresh loop objects; after the last resume every invariant that applies must hold (see
 * test/support/compositionChecks.ts). Known gaps are reported as skipped, with their reason.
 * Reproduce a failure with LOOM_COMPOSITION_SEED (printed with it).
 */

const SEED = Number(process.env.LOOM_COMPOSITION_SEED ?? 0xc0de);
const CRASHES = 2;
/** Features whose scenario cannot complete without resuming a run (it stops to wait). */
const STOPS: readonly Feature[] = ["approval", "sleep", "eventWait", "budget"];

// A crashed run stops its actors while calls are still settling; xstate warns for each late event.
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

/** A world whose executions are recorded per era: a crashed loop's late calls stay in its era. */
function eraWorld(shared: World, executions: string[]): World {
  return { ...shared, executed: (runId, stepId) => executions.push(`${runId} ${stepId}`) };
}

/** Runs the scenario crashed at each of `crashAt` (appends into each era), then to its end; checks it. */
async function composed(features: ReadonlySet<Feature>, crashAt: readonly number[], ref: Uninterrupted) {
  const backend = memoryBackend();
  const shared = memoryWorld();
  const budgetOf = (k: number) => (features.has("budget") ? ref.budgets[k] : undefined);
  const eras: Era[] = [];
  const at = `${[...features].join(" + ")} (seed ${SEED}, crashes after appends ${crashAt.join(", ")})`;
  let outputs: readonly AgentOutput[] | undefined;
  for (const k of [...crashAt, undefined]) {
    const executions: string[] = [];
    const over = k === undefined ? backend.store : crashingStore(backend.store, k);
    const journal = backend.journalOn(features, over);
    const world = eraWorld(shared, executions);
    const ended = await drive({ features, world, journal, budgetOf }).then(
      (out) => out,
      (e: unknown) => e as Error,
    );
    if (ended instanceof Error) {
      expect(ended.message, `${at}: what stopped era ${eras.length}`).toMatch(/simulated crash before append/);
    } else {
      outputs = ended;
    }
    eras.push({ executions, completedAtEnd: await completedFrames(backend.journalOn(features)) });
    if (outputs !== undefined) break; // completed before the next crash point
  }
  expect(outputs, `${at}: completed`).toBeDefined();
  const report = await checkInvariants({
    features,
    journal: backend.journalOn(features),
    storedText: backend.storedText,
    outputs: outputs ?? [],
    budgetOf,
    eras,
    reference: ref.reference,
  });
  expect((await runsOf(backend.journalOn(features))).length).toBeGreaterThanOrEqual(messagesOf(features));
  return { report, eras: eras.length };
}

/** Each pair of features, in FEATURES order, then every feature at once. */
const PAIRS: Feature[][] = FEATURES.flatMap((a, i) => FEATURES.slice(i + 1).map((b) => [a, b]));

/** Why a combination is not run on main, when a known gap blocks it (printed as skipped). */
function blocked(features: ReadonlySet<Feature>): string | undefined {
  const reason = KNOWN_GAPS.redactedBlobResume;
  if (reason === undefined || !features.has("redaction") || !features.has("claimCheck")) return undefined;
  return STOPS.some((f) => features.has(f)) ? reason : undefined;
}

/** The seeded crash points of a combination: `CRASHES` append counts, each within the run's appends. */
function crashPoints(features: ReadonlySet<Feature>, appends: number, index: number): number[] {
  // Redaction with a known resume gap: no crash either (a crash means a resume).
  if (KNOWN_GAPS.redactedBlobResume !== undefined && features.has("redaction") && features.has("claimCheck")) return [];
  const random = seededRandom(SEED + index);
  return Array.from({ length: CRASHES }, () => Math.floor(random() * appends));
}

describe("the composition scenario, each pair of features on (memory store, crashed and resumed)", () => {
  it.each(PAIRS.map((pair, index) => ({ pair, index, name: pair.join(" + ") })))(
    "$name: resumes to the uninterrupted history with every invariant holding",
    async ({ pair, index }) => {
      const features = new Set(pair);
      const why = blocked(features);
      if (why !== undefined) {
        console.log(`composition [${pair.join(" + ")}]: skipped: ${why}`);
        return;
      }
      const ref = await uninterrupted(features);
      const { report, eras } = await composed(features, crashPoints(features, ref.appends, index), ref);
      console.log(`composition [${pair.join(" + ")}] (${eras} eras): ${report.join("; ")}`);
      expect(report.some((line) => line.startsWith("ok "))).toBe(true);
    },
  );

  it("two sub-agents started together stay within the budget their parent has left", async () => {
    // A budget that runs out while both sub-agents run: each may take only what the other leaves.
    const features = new Set<Feature>(["subAgent", "budget"]);
    const firstBudget = { modelCalls: 3 };
    const world = memoryWorld();
    const journal = memoryBackend().journalOn(features);
    await drive({ features, world, journal, budgetOf: () => undefined, firstBudget });
    const [stop] = await budgetStops(journal, runIdOf(features, 0));
    const used = (await usageWithSubRuns(journal, runIdOf(features, 0))).modelCalls;
    const reason = KNOWN_GAPS.parallelSubAgentOverspend;
    if (reason !== undefined) {
      console.log(
        `composition [two sub-agents, budget of 3 calls]: skipped: ${reason} (the stop recorded ${stop?.used.modelCalls} calls)`,
      );
      return;
    }
    expect(stop?.used.modelCalls, "model calls when the budget stopped the run").toBeLessThanOrEqual(3);
    expect(used, "model calls of the run and its sub-agents").toBeGreaterThan(3); // resumed past it, under no budget
  });

  it("every feature at once: resumes to the uninterrupted history with every invariant holding", async () => {
    // A redacted claim-checked output blocks a resume while its gap is open: claim-check is left out.
    const left = KNOWN_GAPS.redactedBlobResume === undefined ? [] : (["claimCheck"] as Feature[]);
    const features = new Set(FEATURES.filter((f) => !left.includes(f)));
    if (left.length > 0) console.log(`composition [all]: claimCheck left out: ${KNOWN_GAPS.redactedBlobResume}`);
    const ref = await uninterrupted(features);
    const random = seededRandom(SEED - 1);
    const crashAt = Array.from({ length: 3 }, () => Math.floor(random() * ref.appends));
    const { report, eras } = await composed(features, crashAt, ref);
    console.log(`composition [all] (${eras} eras, crashes after ${crashAt.join(", ")}): ${report.join("; ")}`);
  });
});

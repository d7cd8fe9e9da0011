import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OpenJournal } from "../../src/events/journal.ts";
import { openSqliteJournal } from "../../src/events/journal.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import type { AgentOutput } from "../../src/projections/types.ts";
import { tempDir } from "../events/tmp.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "../postgres/pg.ts";
import { compositionJournal, FEATURES, type Feature } from "../support/composition.ts";
import { checkInvariants, completedFrames, type Era } from "../support/compositionChecks.ts";
import { type Uninterrupted, uninterrupted } from "../support/compositionMemory.ts";
import { seededRandom } from "../support/kitchenSink.ts";
import { startWorker } from "../support/processes.ts";
import { KNOWN_GAPS } from "./compositionGaps.ts";

/**
 * The composition suite under SIGKILL: every feature of the composition scenario on at once (a
 * session of 3 messages, each with a sub-agent, an approval, a sleep, an event wait, a summarizing
 * context policy, a budget, claim-check at 1 kB, gzip + AES, redaction, compact snapshots) in a
 * child process on a SQLite file and on a PostgreSQL schema, killed with SIGKILL at seeded random
 * points (after a random number of its effects, plus 0-3 ms) and resumed by fresh processes until
 * the session is answered. Each scene is killed 1 to 3 times (a kill can land in a resume); after
 * its last resume every invariant of test/support/compositionChecks.ts must hold. Scenes run until
 * LOOM_COMPOSITION_KILLS (50) kills have landed mid-run on each store.
 *
 * Slow (minutes): run by `npm run test:slow` (LOOM_SLOW=1), skipped by `npm test`. Reproduce a
 * failure with LOOM_COMPOSITION_SEED (printed with it).
 */

const SLOW = process.env.LOOM_SLOW === "1";
const KILLS = Number(process.env.LOOM_COMPOSITION_KILLS ?? 50);
const SEED = Number(process.env.LOOM_COMPOSITION_SEED ?? 0x6b111);
const LANES = 2;
const worker = fileURLToPath(new URL("./fixtures/compositionWorker.ts", import.meta.url));

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-composition-");
});
afterAll(() => tmp?.remove());

/** Every feature, less claim-check while a redacted claim-checked output blocks a resume (said in the output). */
function featuresOn(): Set<Feature> {
  const left: Feature[] = KNOWN_GAPS.redactedBlobResume === undefined ? [] : ["claimCheck"];
  if (left.length > 0) console.log(`composition kills: claimCheck left out: ${KNOWN_GAPS.redactedBlobResume}`);
  return new Set(FEATURES.filter((f) => !left.includes(f)));
}

/** Where one scenario lives: its store (opened by the test between processes) and its world's files. */
interface Scene {
  readonly name: string;
  readonly args: readonly string[];
  readonly worldDir: string;
  open(): Promise<OpenJournal>;
  /** Every byte the store holds, as text. */
  storedText(): Promise<string>;
  remove(): Promise<void>;
}

function sqliteScene(i: number): Scene {
  const db = tmp.file(`scene-${i}.db`);
  const worldDir = tmp.file(`scene-${i}-world`);
  mkdirSync(worldDir);
  return {
    name: `sqlite scene ${i}`,
    args: ["sqlite", db, "-"],
    worldDir,
    open: async () => openSqliteJournal(db),
    storedText: async () =>
      ["", "-wal", "-shm"]
        .map((suffix) => `${db}${suffix}`)
        .filter((f) => existsSync(f))
        .map((f) => readFileSync(f).toString("latin1"))
        .join("\n"),
    remove: async () => undefined,
  };
}

function postgresScene(i: number): Scene {
  const schema = freshSchema(`composition_${i}`);
  const worldDir = tmp.file(`pg-scene-${i}-world`);
  mkdirSync(worldDir);
  return {
    name: `postgres scene ${i} (${schema})`,
    args: ["postgres", PG_URL as string, schema],
    worldDir,
    open: async () => openPostgresJournal(PG_URL as string, { schema }),
    async storedText() {
      const tables = await sql<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
        [schema],
      );
      const parts: string[] = [];
      for (const { table_name } of tables) {
        for (const { row } of await sql<{ row: string }>(`SELECT t::text AS row FROM "${schema}"."${table_name}" t`)) {
          parts.push(row);
          // bytea columns print as hex: their bytes too, as text.
          for (const [, hex] of row.matchAll(/\\\\x([0-9a-f]+)/g))
            parts.push(Buffer.from(hex ?? "", "hex").toString("latin1"));
        }
      }
      return parts.join("\n");
    },
    remove: () => dropSchema(schema).then(() => undefined),
  };
}

/** The kill points of one scene: after this many effects of its process, then this many ms. */
interface Kill {
  readonly afterEffects: number;
  readonly delayMs: number;
}

interface SceneResult {
  readonly kills: number;
  readonly report: string[];
}

const executionsOf = (worldDir: string, era: number): string[] => {
  const file = `${worldDir}/exec`;
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.startsWith(`${era} `))
    .map((l) => l.slice(`${era} `.length));
};

/** Runs one scene: killed at each of `kills` (unless it ends first), then resumed to its end and checked. */
async function runScene(
  scene: Scene,
  features: ReadonlySet<Feature>,
  kills: readonly Kill[],
  ref: Uninterrupted,
): Promise<SceneResult> {
  const budgetOf = (k: number) => ref.budgets[k];
  const args = (era: number) => [
    ...scene.args,
    [...features].join(","),
    JSON.stringify(ref.budgets),
    scene.worldDir,
    String(era),
  ];
  const at = `${scene.name} (seed ${SEED}, kills ${kills.map((k) => `${k.afterEffects}+${k.delayMs.toFixed(1)}ms`).join(", ")})`;
  const eras: Era[] = [];
  const endEra = async () => {
    const journal = await scene.open();
    try {
      eras.push({
        executions: executionsOf(scene.worldDir, eras.length),
        completedAtEnd: await completedFrames(compositionJournal(journal, features)),
      });
    } finally {
      await journal.close();
    }
  };
  // The store's tables exist before the first process races to make them.
  const first = await scene.open();
  await first.store.listRuns();
  await first.close();
  let landed = 0;
  let doneLine: string | undefined;
  for (const kill of kills) {
    const proc = startWorker(worker, args(eras.length));
    let seen = 0;
    await proc.waitFor(
      (l) =>
        l.startsWith("done ") ||
        (kill.afterEffects === 0 ? l === "ready" : l.startsWith("effect ") && ++seen >= kill.afterEffects),
      `${at}: kill point of era ${eras.length}`,
    );
    await new Promise((resolve) => setTimeout(resolve, kill.delayMs));
    proc.child.kill("SIGKILL");
    const exit = await proc.exited;
    doneLine = proc.lines.find((l) => l.startsWith("done "));
    if (doneLine === undefined) {
      expect(exit.signal, `${at}: era ${eras.length}: ${proc.stderr()}`).toBe("SIGKILL");
      landed++;
    }
    await endEra();
    if (doneLine !== undefined) break; // it finished before the kill point
  }
  if (doneLine === undefined) {
    const proc = startWorker(worker, args(eras.length));
    doneLine = await proc.waitFor((l) => l.startsWith("done "), `${at}: the last resume`, 60_000);
    expect((await proc.exited).code, `${at}: ${proc.stderr()}`).toBe(0);
    await endEra();
  }
  const outputs = JSON.parse(doneLine.slice("done ".length)) as AgentOutput[];
  const stored = await scene.storedText();
  const journal = await scene.open();
  try {
    const report = await checkInvariants({
      features,
      journal: compositionJournal(journal, features),
      storedText: async () => stored,
      outputs,
      budgetOf,
      eras,
      reference: ref.reference,
    }).catch((e: unknown) => {
      throw new Error(`${at}: ${(e as Error).message}`, { cause: e });
    });
    return { kills: landed, report };
  } finally {
    await journal.close();
  }
}

/** Scene `i`'s 1-3 kill points, drawn from the seed and its index alone (so it reproduces). */
function killsOf(seed: number, i: number, effects: number): Kill[] {
  const random = seededRandom(seed * 1_000 + i);
  const n = 1 + Math.floor(random() * 3);
  return Array.from({ length: n }, () => ({ afterEffects: Math.floor(random() * effects), delayMs: random() * 3 }));
}

/** Runs scenes, LANES at a time, until KILLS kills have landed mid-run. */
async function killSuite(store: string, sceneOf: (i: number) => Scene, seed: number) {
  const features = featuresOn();
  const ref = await uninterrupted(features);
  let next = 0;
  let kills = 0;
  const lines = new Set<string>();
  const lane = async () => {
    while (kills < KILLS) {
      const i = next++;
      const scene = sceneOf(i);
      try {
        const result = await runScene(scene, features, killsOf(seed, i, ref.effects), ref);
        kills += result.kills;
        for (const line of result.report) lines.add(line);
      } finally {
        await scene.remove();
      }
    }
  };
  await Promise.all(Array.from({ length: LANES }, lane));
  console.log(
    `composition kills [${store}] (seed ${seed}): ${next} scenes, ${kills} SIGKILLs landed mid-run, every scene resumed to its end; after each: ${[...lines].join("; ")}`,
  );
  expect(kills, "kills that landed mid-run").toBeGreaterThanOrEqual(KILLS);
}

describe.skipIf(!SLOW)("the composition scenario under SIGKILL (slow: npm run test:slow, LOOM_SLOW=1)", () => {
  it(`SQLite: ${KILLS}+ kills at random points, each scene resumed to the uninterrupted history with every invariant holding`, async () => {
    await killSuite("sqlite", sqliteScene, SEED);
  }, 1_200_000);

  it.skipIf(PG_URL === undefined)(
    `PostgreSQL: ${KILLS}+ kills at random points, each scene resumed to the uninterrupted history with every invariant holding`,
    async () => {
      await killSuite("postgres", postgresScene, SEED + 1);
    },
    1_200_000,
  );
});

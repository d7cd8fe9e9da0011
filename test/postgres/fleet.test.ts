import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal, sharedRateLimit, submitRun } from "../../src/postgres.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { dropSchema, freshSchema, PG_URL, sql, until } from "./pg.ts";

const root = join(import.meta.dirname, "../..");

/** Spawns test/postgres/fixtures/fleetWorker.ts; resolves once it printed `ready`. */
async function spawnWorker(index: number, schema: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "test/postgres/fixtures/fleetWorker.ts"], {
    cwd: root,
    env: { ...process.env, LOOM_PG_SCHEMA: schema, LOOM_WORKER: String(index), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d) => {
    stderr += String(d);
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (d) => {
      if (String(d).includes("ready")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`worker ${index} exited (${code}) before it was ready: ${stderr}`)));
  });
  return child;
}

async function stopAll(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once("exit", () => resolve());
          c.kill("SIGTERM");
          setTimeout(() => c.kill("SIGKILL"), 10_000).unref();
        }),
    ),
  );
}

/** The loops as the test process knows them: it only submits; the workers' models answer. */
const unused = scriptedModel(() => {
  throw new Error("the test process submits runs; workers run them");
});

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so): workers need a server.
describe.skipIf(PG_URL === undefined)("many workers sharing one database", () => {
  it("3 worker processes: a small tenant's 10 runs all start within 5 s while a large tenant's backlog of 400 runs", async () => {
    const schema = freshSchema("fair");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    const workers: ChildProcess[] = [];
    const fair = agentLoop$({ id: "fair", model: unused });
    try {
      await journal.store.listRuns(); // creates the tables
      for (let i = 0; i < 400; i += 50) {
        await Promise.all(
          Array.from({ length: 50 }, (_, k) =>
            submitRun(journal, {
              runId: `big-${String(i + k).padStart(3, "0")}`,
              loop: fair,
              input: "go",
              tenant: "big",
            }),
          ),
        );
      }
      // The backlog is queued before the workers start, so it is still there when the small tenant comes.
      for (let i = 0; i < 3; i++)
        workers.push(await spawnWorker(i, schema, { LOOM_FLEET: "fair", LOOM_MODEL_MS: "300" }));
      // Cheap to ask (the view of the journal formats every entry): runs whose last entry is run.completed.
      const completed = async (prefix: string) =>
        (
          await sql<{ n: number }>(
            `SELECT count(*)::int AS n FROM "${schema}".loom_runs r JOIN "${schema}".loom_entry_types t ON t.code = r.last_type
              WHERE t.type = 'run.completed' AND r.run_id LIKE $1`,
            [`${prefix}%`],
          )
        )[0]!.n;
      await until("the large tenant's backlog to be running", async () => (await completed("big-")) >= 20, 60_000, 100);
      for (let i = 0; i < 10; i++)
        await submitRun(journal, { runId: `small-${i}`, loop: fair, input: "go", tenant: "small" });
      await until("the small tenant's runs to complete", async () => (await completed("small-")) === 10, 60_000, 100);

      // When each run was submitted (its run.started) and claimed (the worker's first append after it).
      const times = await sql<{ run_id: string; submitted: number; claimed: number }>(
        `SELECT r.run_id, min(e.at) FILTER (WHERE e.seq = 1)::float8 AS submitted, min(e.at) FILTER (WHERE e.seq = 2)::float8 AS claimed
           FROM "${schema}".loom_entries e JOIN "${schema}".loom_runs r ON r.run = e.run GROUP BY r.run_id`,
      );
      const small = times.filter((r) => r.run_id.startsWith("small-"));
      expect(small).toHaveLength(10);
      const waits = small.map((r) => r.claimed - r.submitted);
      const lastSmallStart = Math.max(...small.map((r) => r.claimed));
      // The large tenant still had a backlog when the small tenant's last run started (claimed null: not yet).
      const bigAfter = times.filter(
        (r) => r.run_id.startsWith("big-") && (r.claimed === null || r.claimed > lastSmallStart),
      ).length;
      expect(
        bigAfter,
        `large tenant's runs started after the small tenant's last (waits ${waits.join(", ")} ms)`,
      ).toBeGreaterThan(100);
      expect(Math.max(...waits), `the small tenant's waits: ${waits.join(", ")} ms`).toBeLessThanOrEqual(5000);
    } finally {
      await stopAll(workers);
      await journal.close();
      await dropSchema(schema);
    }
  }, 180_000);

  it("3 worker processes never exceed a shared limit of 120 calls a minute over 30 s; calls over it wait, none fails", async () => {
    const schema = freshSchema("ratelimit");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    const workers: ChildProcess[] = [];
    const RUNS = 66; // at 2 calls a second, about 32 s
    const limited = agentLoop$({
      id: "limited",
      model: sharedRateLimit(unused, { journal, key: "shared", requestsPerMinute: 120 }),
    });
    try {
      await journal.store.listRuns();
      for (let i = 0; i < 3; i++) {
        workers.push(await spawnWorker(i, schema, { LOOM_FLEET: "limited", LOOM_RPM: "120", LOOM_CONCURRENCY: "8" }));
      }
      await Promise.all(
        Array.from({ length: RUNS }, (_, i) => submitRun(journal, { runId: `lim-${i}`, loop: limited, input: "go" })),
      );
      const journaled = async () =>
        (
          await sql<{ data: string }>(
            `SELECT data FROM "${schema}".loom_journal WHERE type = 'frame.completed' AND data LIKE '%called %'`,
          )
        ).map((r) => Number(/called (\d+)/.exec(r.data)![1]));
      await until("every run's model call", async () => (await journaled()).length === RUNS, 120_000, 250);
      const calls = (await journaled()).sort((a, b) => a - b);
      const failed = await sql(`SELECT 1 FROM "${schema}".loom_journal WHERE type = 'run.failed'`);
      expect(failed).toHaveLength(0);
      // Sliding windows from each call: at most the burst (1 s worth: 2 calls) plus 2 a second.
      for (const seconds of [5, 10, 30]) {
        let most = 0;
        for (let i = 0; i < calls.length; i++) {
          let j = i;
          while (j < calls.length && calls[j]! < calls[i]! + seconds * 1000) j++;
          most = Math.max(most, j - i);
        }
        expect(most, `calls within ${seconds} s`).toBeLessThanOrEqual(2 + 2 * seconds);
      }
      // They waited for the limit rather than failing, and not much longer than it asks.
      const span = (calls[calls.length - 1]! - calls[0]!) / 1000;
      expect(span).toBeGreaterThanOrEqual(((RUNS - 2) / 2) * 0.95);
      expect(span).toBeLessThan(((RUNS - 2) / 2) * 2);
    } finally {
      await stopAll(workers);
      await journal.close();
      await dropSchema(schema);
    }
  }, 180_000);
});

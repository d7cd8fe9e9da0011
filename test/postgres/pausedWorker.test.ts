import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import { openPostgresJournal, submitRun } from "../../src/postgres.ts";
import { type Worker as Process, startWorker as startProcess } from "../support/processes.ts";
import { pausedLoop } from "./fixtures/pausedWorker.ts";
import { dropSchema, freshSchema, PG_URL, sleep, sql, until } from "./pg.ts";

/**
 * Issue 30 item 2: a worker SIGSTOPped while it holds runs, past its lease, then SIGCONTed. It had
 * appended some steps' `frame.started` before the pause (appends in flight); the other worker
 * takes those runs over and completes the steps; the woken worker must not call a model or tool
 * for them (it checks its lease by its monotonic clock before an effect and renews it, fenced,
 * first: the renewal is refused). Three waves, each pausing one of the two workers.
 */

const LEASE_MS = 2000;
const PAUSE_MS = 4500;
const WAVES = 3;
const RUNS_PER_WAVE = 20;
const TURNS = 20;

interface Invocation {
  readonly pid: number;
  readonly run: string;
  readonly step: string;
  readonly at: number;
  /** ms since a lease check last read the worker's clock, at the call (null: no check ever did). */
  readonly sinceCheck: number | null;
}

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so): workers need a server.
describe.skipIf(PG_URL === undefined)("startWorker, a worker paused past its lease while it holds runs", () => {
  it("calls no model or tool for a step another worker completed meanwhile (2 workers, lease 2 s, SIGSTOP 4.5 s, 3 waves)", async () => {
    const schema = freshSchema("stale");
    const dir = mkdtempSync(join(tmpdir(), "loom-stale-"));
    const file = join(dir, "invocations.jsonl");
    writeFileSync(file, "");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    const workers: Process[] = [];
    try {
      await journal.store.listRuns(); // creates the schema and Loom's tables
      for (let i = 0; i < 2; i++) {
        // `env` of the spawned process: the helper passes process.env, so set what it needs there.
        const env = {
          LOOM_PG_SCHEMA: schema,
          LOOM_WORKER: String(i),
          LOOM_LEASE_MS: String(LEASE_MS),
          LOOM_INVOCATIONS: file,
          LOOM_TURNS: String(TURNS),
        };
        workers.push(withEnv(env, () => startProcess("test/postgres/fixtures/pausedWorker.ts", [])));
      }
      await Promise.all(workers.map((w) => w.waitFor((l) => l === "ready", "the worker to be ready")));
      const invocations = () =>
        readFileSync(file, "utf8")
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l) as Invocation);

      const runIds: string[] = [];
      const held: number[] = [];
      for (let wave = 0; wave < WAVES; wave++) {
        const victim = workers[wave % 2]!;
        const pid = victim.child.pid!;
        const ids = Array.from({ length: RUNS_PER_WAVE }, (_, i) => `w${wave}-run-${String(i).padStart(2, "0")}`);
        runIds.push(...ids);
        const wanted = new Set(ids);
        for (const runId of ids) await submitRun(journal, { runId, loop: pausedLoop, input: runId });
        // Pause it once it is well into this wave's runs: it holds some, with appends in flight.
        await until(
          `worker ${pid} to work on wave ${wave}`,
          () => invocations().filter((x) => x.pid === pid && wanted.has(x.run)).length >= 6,
          20_000,
          5,
        );
        victim.child.kill("SIGSTOP");
        const holding = await sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${schema}".loom_owners WHERE pid = $1 AND owner IS NOT NULL AND run_id LIKE $2`,
          [pid, `w${wave}-%`],
        );
        held.push(holding[0]?.n ?? 0);
        await sleep(PAUSE_MS);
        victim.child.kill("SIGCONT");
        await until(
          `wave ${wave}'s runs to complete`,
          async () =>
            (await journal.store.listRuns()).filter((r) => wanted.has(r.runId) && r.lastType === "run.completed")
              .length === RUNS_PER_WAVE,
          30_000,
          50,
        ).catch((e: Error) => {
          throw new Error(`${e.message}; worker stderr:\n${workers.map((w) => w.stderr()).join("\n")}`);
        });
        await sleep(300); // the woken worker's last steps, if any, are in the file before the next wave
      }
      for (const w of workers) w.child.kill("SIGTERM");
      expect(await Promise.all(workers.map((w) => w.exited))).toEqual(workers.map(() => ({ code: 0, signal: null })));

      // When each step was first completed, by the journal (meta.at: the appending process's clock).
      const completedAt = new Map<string, number>();
      for (const runId of runIds) {
        const entries = await readJournal(journal, runId);
        expect(entries.at(-1)).toMatchObject({ type: "run.completed", data: { output: { content: `done ${runId}` } } });
        for (const e of entries) {
          const key = `${runId}/${e.type === "frame.completed" ? e.data.frameId : ""}`;
          if (e.type === "frame.completed" && !completedAt.has(key)) completedAt.set(key, Date.parse(e.meta.at));
        }
      }
      const all = invocations();
      const late = all.filter((x) => {
        const done = completedAt.get(`${x.run}/${x.step}`);
        return done !== undefined && x.at > done;
      });
      // A process stopped between a call's lease check and the call itself (the next instructions:
      // no check can close that window) shows the pause since its check; any other late call is
      // one that started without a check, the fault this test is for.
      const pausedAfterCheck = late.filter((x) => x.sinceCheck !== null && x.sinceCheck >= PAUSE_MS / 2);
      const stale = late.filter((x) => !pausedAfterCheck.includes(x));
      const owners = await sql<{ token: number }>(`SELECT token FROM "${schema}".loom_owners`);
      const takeovers = owners.filter((o) => o.token > 1).length;
      console.log(
        `paused workers: ${WAVES} waves, ${runIds.length} runs, runs held at each pause ${held.join("/")}, takeovers ${takeovers}, model/tool invocations ${all.length}, stopped between check and call ${pausedAfterCheck.length}, stale ${stale.length}${stale.length ? `: ${JSON.stringify(stale.slice(0, 5))}` : ""}`,
      );
      expect(
        held.every((n) => n > 0),
        "the paused worker held runs at each pause",
      ).toBe(true);
      expect(takeovers, "the other worker took the paused worker's runs over").toBeGreaterThan(0);
      expect(stale, "invocations of a step after another worker completed it").toEqual([]);
    } finally {
      for (const w of workers) {
        if (w.child.exitCode === null && w.child.signalCode === null) {
          w.child.kill("SIGCONT");
          w.child.kill("SIGKILL");
        }
      }
      await Promise.all(workers.map((w) => w.exited));
      await journal.close();
      await dropSchema(schema);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

/** Runs `start` with `env` set in process.env (what a spawned process inherits), then restores it. */
function withEnv<T>(env: Record<string, string>, start: () => T): T {
  const before = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return start();
  } finally {
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

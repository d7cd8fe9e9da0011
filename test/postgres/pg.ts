import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach } from "vitest";
import { openPostgresJournal } from "../../src/postgres.ts";
import { tempDir } from "../events/tmp.ts";
import { type Worker as Process, startWorker as startProcess } from "../support/processes.ts";

/**
 * The postgres suites run against a real server named by LOOM_PG_URL (`npm run test:pg` starts a
 * throwaway one). Without it they are skipped: there is no PostgreSQL to test against.
 */
export const PG_URL = process.env.LOOM_PG_URL;

export const SKIPPED = "postgres suites skipped: set LOOM_PG_URL (see README)";

/** A schema name no other run or test uses, so runs on one database never collide. */
export const freshSchema = (what: string): string => `loom_test_${what}_${randomBytes(5).toString("hex")}`;

/** Runs `sql` on a connection of its own (to set up, inspect or damage what a test stored). */
export async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

export const dropSchema = (schema: string) => sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `probe` every `everyMs` until it holds; throws naming `what` once `ms` have passed. */
export async function until(
  what: string,
  probe: () => Promise<boolean> | boolean,
  ms = 15_000,
  everyMs = 20,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Clean-ups a test registers; `cleanAfterEach` runs them after each test, the last first. */
export type Cleanups = (() => Promise<unknown> | unknown)[];

/** A list of clean-ups run after each test of the file, in reverse order (call once, at the top). */
export function cleanAfterEach(): Cleanups {
  const cleanups: Cleanups = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return cleanups;
}

/**
 * What a test that spawns worker processes on PostgreSQL needs: a fresh schema, a temporary
 * folder, a journal on the schema, and `spawn` to start a worker process (test/support's
 * `startWorker`). After the test each process still alive is SIGKILLed and awaited, then the
 * journal closed, the schema dropped and the folder removed.
 */
export function processScene(what: string, cleanups: Cleanups) {
  const schema = freshSchema(what);
  const dir = tempDir(`loom-${what}-`);
  const journal = openPostgresJournal(PG_URL as string, { schema });
  const processes: Process[] = [];
  cleanups.push(
    () => dir.remove(),
    () => dropSchema(schema),
    () => journal.close(),
    () =>
      Promise.all(
        processes.map((p) => {
          p.child.kill("SIGKILL");
          return p.exited;
        }),
      ),
  );
  const spawn = (script: string, args: readonly string[]): Process => {
    const p = startProcess(script, args);
    processes.push(p);
    return p;
  };
  return { schema, dir, journal, processes, spawn };
}

/**
 * Records the text of every query sent on the pool's connections from now on (each is one round
 * trip: pg sends one at a time), in the array it returns.
 */
export function countQueries(pool: pg.Pool): string[] {
  const sent: string[] = [];
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as unknown as { query: unknown }).query = (...a: unknown[]) => {
      const q = a[0] as string | { text?: string };
      sent.push(typeof q === "string" ? q : (q.text ?? ""));
      return query(...a);
    };
  });
  return sent;
}

/** Whether a statement relaxes its transaction's commit (an append with durability "written"). */
export const relaxes = (text: string) => text.includes("set_config('synchronous_commit', 'off', true)");

import { randomBytes } from "node:crypto";
import pg from "pg";

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

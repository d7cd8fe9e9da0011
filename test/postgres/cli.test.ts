import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  listPendingApprovals,
  type OpenJournal,
  openSqliteJournal,
  readJournal,
  recordApproval,
} from "../../src/index.ts";
import { openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import { freePort, loom, tempDir } from "../cli/support.ts";
import { approvalLoop, REFUND_STEP } from "../runtime/workers/approvalLoop.ts";
import { dropSchema, freshSchema, PG_URL, sleep, sql, until } from "./pg.ts";

/**
 * The same runs, recorded once in a SQLite file and once in a PostgreSQL schema: `order-1` and
 * `order-2` wait for approval of the refund, `order-3` was approved and completed.
 */
async function record(journal: OpenJournal): Promise<void> {
  const { loop } = approvalLoop({ approvalTimeoutMs: 3_600_000 });
  for (const runId of ["order-1", "order-2", "order-3"]) {
    await loop.run({ runId, journal, input: "refund" }).catch(() => {});
    await sleep(5); // distinct start times: `loom runs` lists by start time
  }
  await recordApproval(journal, "order-3", REFUND_STEP, { approved: true, by: "ana" });
  await loop.run({ runId: "order-3", journal });
}

/** What may differ between two recordings of the same runs: where the journal is, and the clock. */
const normalized = (text: string, where: string) =>
  text
    .split(where)
    .join("<journal>")
    .replace(/\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z?/g, "<time>")
    .replace(/\d[\d,]* ms\b/g, "<n> ms")
    .replace(/"durationMs": \d+/g, '"durationMs": <n>');

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("the loom command on PostgreSQL", () => {
  const dir = tempDir("loom-cli-pg-");
  const schema = freshSchema("cli");
  // A name of our own for the CLI's connections: none may be left open once a command is done.
  const appName = `loom_cli_${randomBytes(4).toString("hex")}`;
  const base = PG_URL ?? "postgres://skipped/"; // the suite is collected, not run, without LOOM_PG_URL
  const url = `${base}${base.includes("?") ? "&" : "?"}application_name=${appName}`;
  const pgLabel = `postgres ${new URL(url).host}${new URL(url).pathname} schema ${schema}`;
  const db = join(dir, "loom.db");
  const onPg = ["--pg", url, "--pg-schema", schema];
  const onSqlite = ["--db", db];
  const openConnections = async () =>
    Number(
      (await sql<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1", [appName]))[0]
        ?.n,
    );

  beforeAll(async () => {
    const sqlite = openSqliteJournal(db);
    const pg = openPostgresJournal(url, { schema });
    try {
      await record(sqlite);
      await record(pg);
    } finally {
      await sqlite.close();
      await pg.close();
    }
  });
  afterAll(() => dropSchema(schema));

  it("lists, shows, logs, approves, denies, cancels and forks the run as it does on SQLite", async () => {
    const session: string[][] = [
      ["runs"],
      ["runs", "--json"],
      ["show", "order-1"],
      ["show", "order-3", "--json"],
      ["show", REFUND_STEP, "--run", "order-1"],
      ["show", REFUND_STEP, "--run", "order-3"],
      ["log", "order-3"],
      ["log", "order-3", "--mode", "lean", "--json"],
      ["log", "nope"],
      ["approvals"],
      ["approvals", "--json"],
      ["approve", REFUND_STEP, "--run", "order-1", "--by", "ana", "--json"],
      ["deny", REFUND_STEP, "--reason", "duplicate", "--by", "ana"],
      ["approvals"],
      ["cancel", "order-1", "--reason", "not needed", "--json"],
      ["fork", "order-2", "--at", "2", "--as", "order-2b"],
      ["runs"],
      ["show", "order-2b"],
    ];
    for (const argv of session) {
      const sqlite = await loom(dir, [...argv, ...onSqlite]);
      const pg = await loom(dir, [...argv, ...onPg]);
      const as = (r: typeof sqlite, where: string) => ({
        code: r.code,
        stdout: normalized(r.stdout, where),
        stderr: normalized(r.stderr, where),
      });
      expect(as(pg, pgLabel), `loom ${argv.join(" ")}`).toEqual(as(sqlite, db));
      expect(pg.code === 0 || argv[1] === "nope", `loom ${argv.join(" ")}: ${pg.stderr}`).toBe(true);
    }
    expect(await openConnections()).toBe(0);
    // What the session journaled is in PostgreSQL: order-1 cancelled, order-2 declined, the fork.
    const runs = JSON.parse((await loom(dir, ["runs", "--json", ...onPg])).stdout) as { runId: string }[];
    expect(runs.map((r) => r.runId)).toEqual(["order-1", "order-2", "order-3", "order-2b"]);
    expect((await loom(dir, ["show", "order-1", ...onPg])).stdout).toContain("stopped cancelled: not needed");
  });

  it("reads LOOM_PG_URL and LOOM_PG_SCHEMA when no --db is given; --db beats them", async () => {
    const env = { LOOM_PG_URL: url, LOOM_PG_SCHEMA: schema };
    const other = join(dir, "other.db");
    const journal = openSqliteJournal(other);
    try {
      await approvalLoop()
        .loop.run({ runId: "sqlite-only", journal, input: "refund" })
        .catch(() => {});
    } finally {
      await journal.close();
    }
    const ids = async (argv: string[]) => {
      const r = await loom(dir, [...argv, "--json"], { env });
      expect(r.code, r.stdout).toBe(0);
      return (JSON.parse(r.stdout) as { runId: string }[]).map((x) => x.runId);
    };
    expect(await ids(["runs"])).toContain("order-2");
    expect(await ids(["runs", "--db", other])).toEqual(["sqlite-only"]);
    expect((await loom(dir, ["runs", ...onPg, "--db", other])).code).toBe(2);
    expect((await loom(dir, ["runs", "--pg-schema", schema, "--db", other])).code).toBe(2);
    expect(await openConnections()).toBe(0);
  });

  it("refuses a schema that holds no Loom journal, without creating it", async () => {
    const missing = freshSchema("cli_none");
    const r = await loom(dir, ["runs", "--pg", url, "--pg-schema", missing]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `no Loom journal in postgres ${new URL(url).host}${new URL(url).pathname} schema ${missing}`,
    );
    expect(await sql("SELECT 1 FROM pg_namespace WHERE nspname = $1", [missing])).toEqual([]);
  });

  it("prunes on PostgreSQL named by the environment", async () => {
    await sleep(20);
    const env = { LOOM_PG_URL: url, LOOM_PG_SCHEMA: schema };
    const dry = await loom(dir, ["prune", "--completed-before", "0s", "--dry-run", "--json"], { env });
    expect(dry.code, dry.stdout).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ runs: 2, dryRun: true }); // order-3 completed, order-1 cancelled;
    const done = await loom(dir, ["prune", "--completed-before", "0s", ...onPg]);
    expect(done.stdout).toMatch(new RegExp(`^${pgLabel}: removed 2 runs finished before`));
    const left = JSON.parse((await loom(dir, ["runs", "--json", ...onPg])).stdout) as { runId: string }[];
    expect(left.map((r) => r.runId)).toEqual(["order-2", "order-2b"]);
    expect(await openConnections()).toBe(0);
  });

  it("an approval from loom approve --pg is taken up by a worker, which finishes the run", async () => {
    const journal = openPostgresJournal(url, { schema });
    const { loop, ran } = approvalLoop();
    // A long poll: only the approval's announcement can make the worker look again in time.
    const worker = startWorker({ journal, loops: { shop: loop }, pollMs: 60_000, leaseMs: 2_000, onError: () => {} });
    try {
      await submitRun(journal, { runId: "queued-1", loop, input: "refund" });
      await until("the approval to be pending", async () =>
        (await listPendingApprovals(journal)).some((p) => p.runId === "queued-1"),
      );
      await until("the worker to let the run go", async () => worker.active.length === 0);
      const approved = await loom(dir, ["approve", REFUND_STEP, "--run", "queued-1", "--by", "ops", ...onPg]);
      expect(approved.code, approved.stderr).toBe(0);
      await until(
        "the run to complete",
        async () => (await readJournal(journal, "queued-1")).at(-1)?.type === "run.completed",
      );
      expect(ran).toEqual([{ orderId: "o-1", cents: 500 }]);
    } finally {
      await worker.stop();
      await journal.close();
    }
  }, 60_000);

  it("loom view serves a PostgreSQL run's page", async () => {
    const stop = new AbortController();
    const port = await freePort();
    const running = loom(dir, ["view", ...onPg, "--port", String(port)], { signal: stop.signal });
    let res: Response | undefined;
    for (let i = 0; i < 100 && !res; i++) {
      res = await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined);
      if (!res) await sleep(50);
    }
    try {
      expect(await res?.text()).toContain("order-2b");
      const page = await fetch(`http://127.0.0.1:${port}/runs/order-2`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain(REFUND_STEP);
      // The live feed follows the run in PostgreSQL: what another command appends arrives, then the end.
      const live = await fetch(`http://127.0.0.1:${port}/runs/order-2b/live`);
      const reader = (live.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
      let feed = "";
      const readUntil = async (text: string) => {
        while (!feed.includes(text)) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`the live feed ended before ${text}: ${feed}`);
          feed += value;
        }
      };
      await readUntil('"type":"run-started"');
      expect((await loom(dir, ["cancel", "order-2b", "--reason", "from the shell", ...onPg])).code).toBe(0);
      await readUntil("event: end");
      expect(feed).toContain('"type":"run-cancelled"');
    } finally {
      stop.abort();
    }
    const { code, stdout } = await running;
    expect(code).toBe(0);
    expect(stdout).toContain(`(${pgLabel})`);
    expect(await openConnections()).toBe(0);
  });
});

import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { packageRoot } from "../../src/cli/packageRoot.ts";
import { captureIo, demoJournal, loom, tempDir } from "./support.ts";

/**
 * Which journal a command opens when PostgreSQL is named (`--pg`, `LOOM_PG_URL`), and what it says
 * when it cannot: none of this needs a PostgreSQL server (test/postgres/cli.test.ts uses one).
 */

const root = packageRoot();
const dir = tempDir("loom-cli-pgsource-");
// Nothing listens on port 1: a PostgreSQL URL there fails at once, and says which database it named.
const NOWHERE = "postgres://ops:secret@127.0.0.1:1/nowhere";

/** `loom …` as a real process with `env` (the test run's LOOM_PG_URL replaced), optionally without `pg`. */
const bin = (args: string[], env: Record<string, string | undefined>, options: { withoutPg?: boolean } = {}) =>
  spawnSync(
    process.execPath,
    [
      "--import",
      "tsx",
      ...(options.withoutPg ? ["--import", join(root, "test/support/withoutPg.mjs")] : []),
      join(root, "src/cli/bin.ts"),
      ...args,
    ],
    { cwd: root, encoding: "utf8", env: { ...process.env, LOOM_PG_URL: undefined, LOOM_PG_SCHEMA: undefined, ...env } },
  );

const PG_COMMANDS = ["runs", "log", "show", "approvals", "approve", "deny", "cancel", "fork", "prune", "view"];

describe("the journal a command opens", () => {
  let db: string;
  beforeAll(async () => {
    db = await demoJournal(dir, 3, 1);
  });

  it("reads the SQLite file --db names even when LOOM_PG_URL is set; without --db, the PostgreSQL it names", async () => {
    const sqlite = bin(["runs", "--db", db, "--json"], { LOOM_PG_URL: NOWHERE, LOOM_PG_SCHEMA: "ops" });
    expect(sqlite.status, sqlite.stderr).toBe(0);
    expect(JSON.parse(sqlite.stdout).map((r: { runId: string }) => r.runId)).toEqual(["done-1", "crashed-1"]);
    const pg = bin(["runs"], { LOOM_PG_URL: NOWHERE, LOOM_PG_SCHEMA: "ops" });
    expect(pg.status).toBe(1);
    expect(pg.stderr).toMatch(/^loom: cannot connect to postgres 127\.0\.0\.1:1\/nowhere schema ops \(LOOM_PG_URL\): /);
    expect(pg.stderr).not.toContain("secret");
  });

  it("does not read the environment when run in-process without io.env", async () => {
    const plain = await loom(dir, ["runs", "--db", db, "--json"]);
    expect(plain.code).toBe(0);
    const withEnv = await loom(dir, ["approvals"], { env: { LOOM_PG_URL: NOWHERE } });
    expect(withEnv.code).toBe(1);
    expect(withEnv.stderr).toContain("cannot connect to postgres 127.0.0.1:1/nowhere (LOOM_PG_URL)");
  });

  it("refuses --pg with --db, and --pg-schema without a PostgreSQL URL, as usage errors", async () => {
    const both = await loom(dir, ["runs", "--pg", NOWHERE, "--db", "x.db"]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("'--pg <url>' cannot be used with option '--db <file>'");
    const schemaAlone = await loom(dir, ["approvals", "--pg-schema", "ops"]);
    expect(schemaAlone.code).toBe(2);
    expect(schemaAlone.stderr).toContain("--pg-schema names a PostgreSQL schema: pass --pg <url>");
    const badName = await loom(dir, ["runs", "--pg", NOWHERE, "--pg-schema", "no-dashes", "--json"]);
    expect(JSON.parse(badName.stdout)).toMatchObject({ error: { code: "postgresSchema" } });
  });

  it("says to install pg, by name, when PostgreSQL is asked for and pg is missing; SQLite works without it", async () => {
    const missing = bin(["runs", "--pg", NOWHERE, "--json"], {}, { withoutPg: true });
    expect(missing.status).toBe(1);
    const { error } = JSON.parse(missing.stdout);
    expect(error.code).toBe("pgNotInstalled");
    expect(error.message).toContain("needs the `pg` package");
    expect(error.message).toContain("npm install pg");
    const fromEnv = bin(["approvals"], { LOOM_PG_URL: NOWHERE }, { withoutPg: true });
    expect(fromEnv.stderr).toMatch(/^loom: LOOM_PG_URL names a PostgreSQL journal, which needs the `pg` package/);
    const sqlite = bin(["runs", "--db", db], { LOOM_PG_URL: NOWHERE }, { withoutPg: true });
    expect(sqlite.status, sqlite.stderr).toBe(0);
    expect(sqlite.stdout).toContain("done-1");
  });

  it("lists --pg and --pg-schema in the help of the commands that take them, only those", async () => {
    for (const command of [...PG_COMMANDS, "demo", "resume", "compact", "inspect"]) {
      const captured = captureIo(dir);
      expect(await main([command, "--help"], captured.io)).toBe(0);
      const takesPg = PG_COMMANDS.includes(command);
      expect(captured.out().includes("--pg <url>"), command).toBe(takesPg);
      expect(captured.out().includes("--pg-schema <name>"), command).toBe(takesPg);
      expect(captured.out()).toContain("--db <file>");
    }
    const top = captureIo(dir);
    await main(["--help"], top.io);
    expect(top.out()).toContain("LOOM_PG_URL");
  });

  it("names the demo's file in its hints when LOOM_PG_URL would send a bare command to PostgreSQL", async () => {
    const demoDir = join(dir, "demo");
    mkdirSync(demoDir);
    const run = await loom(demoDir, ["demo", "--turns", "2"], { env: { LOOM_PG_URL: NOWHERE } });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/ runs --db \.\/loom\.db\n/);
  });
});

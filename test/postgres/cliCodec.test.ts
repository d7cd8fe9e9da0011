import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDemoSession } from "../../src/cli/demo/session.ts";
import { packageRoot } from "../../src/cli/packageRoot.ts";
import { payloadCodec, staticKeys, withCodec } from "../../src/journal.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { loom, tempDir } from "../cli/support.ts";
import { dropSchema, freshSchema, PG_URL } from "./pg.ts";

// Skipped without LOOM_PG_URL: no PostgreSQL server to hold an encrypted journal.
describe.skipIf(PG_URL === undefined)("the loom command on an encrypted PostgreSQL journal", () => {
  const dir = tempDir("loom-cli-pg-codec-");
  const schema = freshSchema("clicodec");
  const key = randomBytes(32);
  const keys = join(dir, "keys.json");
  const onPg = ["--pg", PG_URL ?? "postgres://skipped/", "--pg-schema", schema];

  beforeAll(async () => {
    writeFileSync(keys, JSON.stringify({ "pg-1": key.toString("base64") }));
    const codec = payloadCodec({
      compress: "brotli",
      encrypt: { keys: staticKeys({ current: "pg-1", keys: { "pg-1": key } }) },
    });
    const journal = openPostgresJournal(PG_URL as string, { schema });
    try {
      await runDemoSession({ journal: withCodec(journal, codec), runId: "enc-1", root: packageRoot(), turns: 3 });
    } finally {
      await journal.close();
    }
  }, 60_000);
  afterAll(() => dropSchema(schema));

  it("runs and show read it with --codec-keys; without the key, exit 1 naming key pg-1", async () => {
    const runs = await loom(dir, ["runs", "--json", ...onPg, "--codec-keys", keys]);
    expect(runs.code, runs.stderr).toBe(0);
    expect(JSON.parse(runs.stdout)[0]).toMatchObject({ runId: "enc-1", status: "completed" });
    const step = await loom(dir, ["show", "loom-demo#turn:1:tool:0", "--run", "enc-1", ...onPg], {
      env: { LOOM_CODEC_KEYS: keys },
    });
    expect(step.code, step.stderr).toBe(0);
    expect(step.stdout).toContain("verified: the digest its frame recorded");
    const without = await loom(dir, ["show", "enc-1", ...onPg, "--json"]);
    expect(without.code).toBe(1);
    expect(JSON.parse(without.stdout).error).toMatchObject({ code: "keyMissing" });
    expect(JSON.parse(without.stdout).error.message).toContain('key "pg-1"');
  });
});

import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runDemoSession } from "../../src/cli/demo/session.ts";
import { packageRoot } from "../../src/cli/packageRoot.ts";
import { type OpenJournal, openSqliteJournal, readJournal } from "../../src/index.ts";
import { payloadCodec, staticKeys, withCodec } from "../../src/journal.ts";
import { freePort, loom, tempDir } from "./support.ts";

/**
 * `loom` on journals written through the payload codec: compression is told by each envelope (no
 * option needed), encryption needs the keys (`--codec-keys <file>` or `LOOM_CODEC_KEYS`), and a
 * key the file lacks is an error naming its id, exit code 1.
 */

const dir = tempDir("loom-cli-codec-");
const k1 = randomBytes(32);
const k2 = randomBytes(32);
const STEP = "loom-demo#turn:2:tool:0";

/** A file of keys: k1 in base64, k2 in hex (the two spellings the file takes). */
const keyFile = (name: string, keys: Record<string, string>) => {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(keys));
  return path;
};

async function writeDemo(db: string, journalOf: (j: OpenJournal) => OpenJournal, runId: string, turns = 4) {
  const file = openSqliteJournal(db);
  try {
    await runDemoSession({ journal: journalOf(file), runId, root: packageRoot(), turns });
  } finally {
    await file.close();
  }
}

let encrypted: string;
let compressed: string;
let plainText: string;
let keys: string;

beforeAll(async () => {
  encrypted = join(dir, "encrypted.db");
  compressed = join(dir, "compressed.db");
  // Written under k1, then (the key rotated) under k2: reading it needs both.
  const under = (current: string) =>
    payloadCodec({ compress: "gzip", encrypt: { keys: staticKeys({ current, keys: { k1, k2 } }) } });
  await writeDemo(encrypted, (j) => withCodec(j, under("k1")), "old-1");
  await writeDemo(encrypted, (j) => withCodec(j, under("k2")), "new-1");
  await writeDemo(compressed, (j) => withCodec(j, payloadCodec({ compress: "gzip", minBytes: 1 })), "gz-1");
  keys = keyFile("keys.json", { k1: k1.toString("base64"), k2: k2.toString("hex") });
  const raw = openSqliteJournal(encrypted);
  try {
    plainText = JSON.stringify(
      await readJournal(
        withCodec(raw, payloadCodec({ encrypt: { keys: staticKeys({ current: "k2", keys: { k1, k2 } }) } })),
        "new-1",
      ),
    );
  } finally {
    await raw.close();
  }
}, 60_000);

describe("loom on an encrypted journal", () => {
  it("runs, show (a run's story and a step, verified), log: with --codec-keys, old and new keys alike", async () => {
    const runs = await loom(dir, ["runs", "--db", encrypted, "--codec-keys", keys, "--json"]);
    expect(runs.code, runs.stderr).toBe(0);
    const listed = JSON.parse(runs.stdout) as { runId: string; status: string }[];
    expect(listed.map((r) => [r.runId, r.status])).toEqual([
      ["old-1", "completed"],
      ["new-1", "completed"],
    ]);

    const story = await loom(dir, ["show", "old-1", "--db", encrypted, "--codec-keys", keys]);
    expect(story.code, story.stderr).toBe(0);
    expect(story.stdout).toContain("answer");

    const step = await loom(dir, ["show", STEP, "--run", "new-1", "--db", encrypted, "--codec-keys", keys, "--json"]);
    expect(step.code, step.stderr).toBe(0);
    const shown = JSON.parse(step.stdout) as { output: unknown; verified: string[] };
    expect(shown.verified).toContain("the digest its frame recorded");
    expect(plainText).toContain(JSON.stringify(shown.output).slice(0, 60));

    const log = await loom(dir, ["log", "new-1", "--db", encrypted, "--codec-keys", keys, "--json"]);
    expect(log.code, log.stderr).toBe(0);
  });

  it("takes the key file from LOOM_CODEC_KEYS", async () => {
    const r = await loom(dir, ["runs", "--db", encrypted], { env: { LOOM_CODEC_KEYS: keys } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("new-1");
  });

  it("without keys, or without the key an entry names: exit 1, an error naming the key id and --codec-keys", async () => {
    const none = await loom(dir, ["show", "new-1", "--db", encrypted]);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/key "k2"/);
    expect(none.stderr).toContain("--codec-keys <file>");

    const onlyNew = keyFile("only-k2.json", { k2: k2.toString("base64") });
    const lacking = await loom(dir, ["show", "old-1", "--db", encrypted, "--codec-keys", onlyNew, "--json"]);
    expect(lacking.code).toBe(1);
    const { error } = JSON.parse(lacking.stdout) as { error: { code: string; message: string } };
    expect(error.code).toBe("keyMissing");
    expect(error.message).toMatch(/no key "k1".*--codec-keys <file> \(or set LOOM_CODEC_KEYS\).*key "k1"/);

    const wrong = keyFile("wrong.json", { k1: k2.toString("base64"), k2: k1.toString("base64") });
    const rejected = await loom(dir, ["show", "new-1", "--db", encrypted, "--codec-keys", wrong, "--json"]);
    expect(rejected.code).toBe(1);
    expect(JSON.parse(rejected.stdout).error.code).toBe("keyRejected");
  });

  it("refuses a key file it cannot use, naming it (exit 1)", async () => {
    const short = keyFile("short.json", { k1: randomBytes(16).toString("base64") });
    const r = await loom(dir, ["runs", "--db", encrypted, "--codec-keys", short, "--json"]);
    expect(r.code).toBe(1);
    const { error } = JSON.parse(r.stdout) as { error: { code: string; message: string } };
    expect(error.code).toBe("codecKeysInvalid");
    expect(error.message).toContain('key "k1" is not 32 bytes');
    const missing = await loom(dir, ["runs", "--db", encrypted, "--codec-keys", join(dir, "nope.json")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/cannot read the key file .*nope\.json \(--codec-keys\)/);
    const notJson = keyFile("not.json", {});
    writeFileSync(notJson, "k1=abc");
    expect((await loom(dir, ["runs", "--db", encrypted, "--codec-keys", notJson])).stderr).toContain("is not JSON");
  });

  it("fork writes its copy encrypted under the file's last key, readable with the keys", async () => {
    const forked = await loom(dir, [
      "fork",
      "new-1",
      "--at",
      STEP,
      "--as",
      "new-1b",
      "--db",
      encrypted,
      "--codec-keys",
      keys,
    ]);
    expect(forked.code, forked.stderr).toBe(0);
    const raw = openSqliteJournal(encrypted, { readonly: true });
    try {
      const stored = await raw.store.read("new-1b");
      const payloads = stored.filter((e) => e.type === "run.started" || e.type === "frame.completed");
      expect(payloads.length).toBeGreaterThan(2);
      for (const e of payloads) {
        expect((e.data as { encoded?: string[] }).encoded, `seq ${e.seq}`).toBeDefined();
        expect(JSON.stringify(e.data), `seq ${e.seq}`).toContain('"keyId":"k2"');
      }
    } finally {
      await raw.close();
    }
    const show = await loom(dir, ["show", "new-1b", "--db", encrypted, "--codec-keys", keys]);
    expect(show.code, show.stderr).toBe(0);
  });

  it("loom view serves the encrypted journal's runs", async () => {
    const stop = new AbortController();
    const port = await freePort();
    const running = loom(dir, ["view", "--db", encrypted, "--codec-keys", keys, "--port", String(port)], {
      signal: stop.signal,
    });
    let res: Response | undefined;
    for (let i = 0; i < 100 && !res; i++) {
      res = await fetch(`http://127.0.0.1:${port}/runs/new-1/steps/${encodeURIComponent(STEP)}`).catch(() => undefined);
      if (!res) await new Promise((r) => setTimeout(r, 50));
    }
    expect(res?.status).toBe(200);
    expect(await res?.text()).toContain("the digest its frame recorded");
    stop.abort();
    expect((await running).code).toBe(0);
  });
});

describe("loom on a compressed journal", () => {
  it("needs no option: compression is told by each entry's envelope", async () => {
    const runs = await loom(dir, ["runs", "--db", compressed, "--json"]);
    expect(runs.code, runs.stderr).toBe(0);
    expect(JSON.parse(runs.stdout)[0].status).toBe("completed");
    const step = await loom(dir, ["show", STEP, "--run", "gz-1", "--db", compressed]);
    expect(step.code, step.stderr).toBe(0);
    expect(step.stdout).toContain("verified: the digest its frame recorded");
  });
});

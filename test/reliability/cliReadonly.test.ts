import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/cli/packageRoot.ts";
import { isJournalFileError, openSqliteJournal } from "../../src/index.ts";
import { demoJournal, loom, tempDir } from "../cli/support.ts";
import { NOBODY, type NobodyRoot, rootForNobody } from "../support/unprivileged.ts";

/**
 * Commands that only read (runs, log, show, inspect) never write to the file they are given:
 * another application's database is refused untouched, with an error naming it, and a read-only
 * journal (file and folder) can be read.
 */

const root = packageRoot();
const dir = tempDir("loom-readonly-");
let journalDb = "";
const sha = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

beforeAll(async () => {
  journalDb = await demoJournal(dir, 3, 1);
});

/** Another application's SQLite database (rollback journal, one table). */
function appDatabase(name: string): string {
  const path = join(dir, name);
  const db = new Database(path);
  db.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ada')");
  db.close();
  return path;
}

const READERS: [string, (db: string) => string[]][] = [
  ["runs", (db) => ["runs", "--db", db]],
  ["log", (db) => ["log", "done-1", "--db", db]],
  ["show", (db) => ["show", "loom-demo#turn:0:tool:0", "--db", db]],
  ["inspect", (db) => ["inspect", "done-1", "--once", "--no-wait", "--db", db]],
  ["runs --json", (db) => ["runs", "--json", "--db", db]],
];

describe("another application's SQLite database", () => {
  it.each(READERS)(
    "loom %s refuses it by name, exit 1, and leaves it byte-identical (no WAL, no tables)",
    async (_, argv) => {
      const app = appDatabase(`app-${_.replace(/\W/g, "")}.db`);
      const before = sha(app);
      const r = await loom(dir, argv(app));
      expect(r.code).toBe(1);
      expect(r.stdout + r.stderr).toContain(`${app} is not a Loom journal`);
      expect(sha(app)).toBe(before);
      expect(existsSync(`${app}-wal`)).toBe(false);
      const db = new Database(app, { readonly: true });
      try {
        expect(db.pragma("journal_mode", { simple: true })).toBe("delete");
        expect(db.prepare("SELECT name FROM sqlite_master ORDER BY name").pluck().all()).toEqual(["users"]);
      } finally {
        db.close();
      }
    },
  );

  it("loom compact and loom demo (which write) refuse it too, before writing anything", async () => {
    const app = appDatabase("app-writers.db");
    const before = sha(app);
    for (const argv of [
      ["compact", "done-1", "--keep-turns", "1", "--db", app],
      ["resume", "done-1", "--db", app],
      ["demo", "--turns", "2", "--db", app],
    ]) {
      const r = await loom(dir, argv);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`${app} is not a Loom journal`);
    }
    expect(sha(app)).toBe(before);
  });

  it("a file that is not SQLite at all: not a Loom journal, named, exit 1", async () => {
    const text = join(dir, "notes.db");
    writeFileSync(text, "these are my notes, not a database\n".repeat(40));
    const r = await loom(dir, ["log", "done-1", "--db", text]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^loom: .*notes\.db is not a Loom journal \(not a SQLite database/);
    expect(readFileSync(text, "utf8")).toMatch(/^these are my notes/);
  });

  it("the library refuses it too: openSqliteJournal(path, { readonly: true }) throws JournalFileError", () => {
    const app = appDatabase("app-library.db");
    let error: unknown;
    try {
      openSqliteJournal(app, { readonly: true });
    } catch (e) {
      error = e;
    }
    expect(isJournalFileError(error) && error.code).toBe("notAJournal");
    expect(isJournalFileError(error) && error.path).toBe(app);
  });
});

describe("a journal read while it is written", () => {
  it("sees what a live writer appended (still in the WAL), and leaves the writer undisturbed", async () => {
    const live = join(dir, "live.db");
    copyFileSync(journalDb, live);
    const writer = openSqliteJournal(live);
    try {
      await writer.store.append(
        "live-1",
        [{ type: "run.started", data: { loopId: "loom-demo", input: "hi", tools: [] } }],
        {
          expectedVersion: 0,
        },
      );
      const r = await loom(dir, ["runs", "--db", live, "--json"]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout).map((run: { runId: string }) => run.runId)).toContain("live-1");
      await writer.store.append("live-1", [{ type: "run.interrupted", data: { reason: "aborted", detail: null } }], {
        expectedVersion: 1,
      });
    } finally {
      await writer.close();
    }
  });

  it("a journal at schema version 2 (before loom_runs.removed) is read read-only as it is, untouched", async () => {
    const v2 = join(dir, "v2.db");
    copyFileSync(journalDb, v2);
    const db = new Database(v2);
    // Version 2's tables: version 3 only added the column and its trigger.
    db.exec(`DROP TRIGGER loom_entries_removed; ALTER TABLE loom_runs DROP COLUMN removed;
             UPDATE loom_meta SET value = '2' WHERE key = 'schema_version'; PRAGMA journal_mode = DELETE`);
    db.close();
    const before = sha(v2);
    const [now, old] = await Promise.all([
      loom(dir, ["runs", "--json", "--db", journalDb]),
      loom(dir, ["runs", "--json", "--db", v2]),
    ]);
    expect(old.code).toBe(0);
    expect(JSON.parse(old.stdout)).toEqual(JSON.parse(now.stdout));
    expect(sha(v2)).toBe(before);
    expect(existsSync(`${v2}-wal`)).toBe(false);
  });

  it("a journal at schema version 1 (a row layout this Loom reads only once migrated) is refused read-only, saying how it is migrated", async () => {
    const old = join(dir, "old.db");
    const db = new Database(old);
    db.exec(
      "CREATE TABLE loom_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO loom_meta VALUES ('schema_version', '1')",
    );
    db.close();
    const before = sha(old);
    const r = await loom(dir, ["runs", "--db", old]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${old} holds Loom's tables at schema version 1`);
    expect(r.stderr).toContain("which migrates it");
    expect(sha(old)).toBe(before);
  });
});

/**
 * Where `loom` runs as a real process. As root, file modes do not stop writes, so the process runs
 * as the unprivileged user `nobody` (uid 65534) to meet the read-only file as any user would; from
 * a clone nobody cannot read (under /root, mode 700) it runs from a readable copy of the CLI.
 */
const asRoot = process.getuid?.() === 0;
const cli: NobodyRoot = asRoot ? rootForNobody(root) : { root, copied: false };
if (cli.skip !== undefined) console.warn(`cliReadonly: read-only journal tests skipped: ${cli.skip}`);
afterAll(() => {
  if (cli.root !== undefined && cli.copied) rmSync(cli.root, { recursive: true, force: true });
});

function loomProcess(args: string[]) {
  const from = cli.root ?? root;
  return spawnSync(process.execPath, ["--import", "tsx", join(from, "src/cli/bin.ts"), ...args], {
    cwd: from,
    encoding: "utf8",
    ...(asRoot ? NOBODY : {}),
  });
}

// Skipped only where root's test process cannot run anything as nobody (see cli.skip for why).
describe.skipIf(cli.skip !== undefined)("a read-only journal (chmod 444, in a read-only folder)", () => {
  let folder = "";
  let file = "";
  beforeAll(() => {
    chmodSync(dir, 0o755);
    folder = join(dir, "readonly");
    mkdirSync(folder);
    file = join(folder, "loom.db");
    copyFileSync(journalDb, file);
    chmodSync(file, 0o444);
    chmodSync(folder, 0o555);
  });
  afterAll(() => chmodSync(folder, 0o755));

  it("loom runs, log and show read it; nothing is written beside it", () => {
    const before = sha(file);
    const runs = loomProcess(["runs", "--db", file]);
    expect(runs.stderr).toBe("");
    expect(runs.status).toBe(0);
    expect(runs.stdout).toMatch(/^done-1 +loom-demo +completed/m);
    const log = loomProcess(["log", "done-1", "--db", file, "--json"]);
    expect(log.status).toBe(0);
    expect(JSON.parse(log.stdout)).toHaveLength(3);
    const show = loomProcess(["show", "loom-demo#turn:1:tool:0", "--run", "done-1", "--db", file]);
    expect(show.status).toBe(0);
    expect(show.stdout).toContain("step    loom-demo#turn:1:tool:0");
    expect(sha(file)).toBe(before);
    expect(readdirSync(folder)).toEqual(["loom.db"]);
  });

  it("loom compact (which writes) fails with an error naming the file, exit 1", () => {
    const r = loomProcess(["compact", "done-1", "--keep-turns", "0", "--db", file]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`cannot write to the journal file ${file}`);
  });
});

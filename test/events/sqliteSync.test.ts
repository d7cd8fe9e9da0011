import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { memoryStore } from "../../src/events/memory.ts";
import { sqliteStore } from "../../src/events/sqlite/sqlite.ts";
import { isJournalFileError } from "../../src/events/sqlite/sqliteOpen.ts";
import { walSync } from "../../src/events/sqlite/sqliteSync.ts";
import type { AppendOptions, EventStore } from "../../src/events/store.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";
import { decision, runStarted } from "./entries.ts";
import { tempDir } from "./tmp.ts";

/** A store that keeps, for each append, its entry types and whether it asked only to be written. */
function recording(inner: EventStore, appends: string[]): EventStore {
  return {
    ...inner,
    async append(runId, entries, options: AppendOptions) {
      appends.push(`${entries.map((e) => e.type).join("+")} ${options.durability ?? "durable"}`);
      return inner.append(runId, entries, options);
    },
  };
}

describe("appends written now, flushed in the background", () => {
  let tmp: ReturnType<typeof tempDir>;
  let path: string;
  beforeEach(() => {
    tmp = tempDir();
    path = tmp.file("journal.db");
  });
  afterEach(() => tmp.remove());

  it("the loop asks it for a model call's start only: a tool's start and the run's end are durable appends", async () => {
    const appends: string[] = [];
    const loop = agentLoop$({
      id: "relaxed",
      model: scriptedModel(({ turn }) =>
        turn === 0 ? { toolCalls: [{ id: "c0", name: "echo", input: { x: 1 } }] } : { content: "done", toolCalls: [] },
      ),
      tools: { echo: { description: "echoes", execute: (input) => input } },
    });
    const out = await loop.run({
      runId: "r",
      input: "go",
      journal: jsonJournal(recording(memoryStore({ json: true }), appends)),
    });
    expect(out.content).toBe("done");
    expect(appends).toEqual([
      "run.started+frame.started written", // model call 0
      "frame.completed+frame.started durable", // the tool's call waits for this one
      "frame.completed+frame.started written", // model call 1
      "frame.completed+run.completed durable",
    ]);
  });

  it("a relaxed append is visible to another connection at once, and the connection goes back to FULL", async () => {
    const store = sqliteStore(path);
    await store.append("r", [runStarted()], { expectedVersion: 0, durability: "written" });
    const other = new Database(path, { readonly: true });
    expect(other.prepare("SELECT count(*) FROM loom_entries").pluck().get()).toBe(1);
    other.close();
    await store.append("r", [decision("d", 1)], { expectedVersion: 1 });
    await store.close();
    const reopened = sqliteStore(path);
    expect((await reopened.read("r")).map((e) => e.seq)).toEqual([1, 2]);
    await reopened.close();
  });

  it("commits at NORMAL only inside the relaxed commit, then flushes the WAL file in the background", async () => {
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec("CREATE TABLE t (x)");
    const flushed: number[] = [];
    let finish: ((e: NodeJS.ErrnoException | null) => void) | undefined;
    const sync = walSync(db, "full", {
      delayMs: 0,
      flushFile: (fd, done) => {
        flushed.push(fd);
        finish = done;
      },
    });
    expect(sync).toBeDefined();
    const levels: unknown[] = [];
    sync?.relaxed(() => {
      levels.push(db.pragma("synchronous", { simple: true }));
      db.prepare("INSERT INTO t VALUES (1)").run();
    });
    levels.push(db.pragma("synchronous", { simple: true }));
    expect(levels).toEqual([1, 2]); // NORMAL inside, FULL after
    expect(flushed).toHaveLength(1);
    // A commit during the flush asks for one more, after it (the first may have missed it).
    sync?.relaxed(() => db.prepare("INSERT INTO t VALUES (2)").run());
    expect(flushed).toHaveLength(1);
    finish?.(null);
    await new Promise((r) => setImmediate(r));
    expect(flushed).toHaveLength(2);
    finish?.(null);
    await sync?.close();
    sync?.check("r"); // nothing failed
    db.close();
  });

  it("waits a moment for a FULL commit to flush it (group commit), else flushes alone; close flushes what waits", async () => {
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    db.exec("CREATE TABLE t (x)");
    let flushes = 0;
    const sync = walSync(db, "full", {
      delayMs: 20,
      flushFile: (_fd, done) => {
        flushes++;
        done(null);
      },
    });
    const insert = db.prepare("INSERT INTO t VALUES (?)");
    sync?.relaxed(() => insert.run(1));
    insert.run(2); // a FULL commit right after (the store's next durable append)…
    sync?.covered(); // …flushed the relaxed one with its own fsync
    await new Promise((r) => setTimeout(r, 40));
    expect(flushes).toBe(0);
    sync?.relaxed(() => insert.run(3)); // nothing follows: flushed alone after the delay
    expect(flushes).toBe(0);
    await new Promise((r) => setTimeout(r, 40));
    expect(flushes).toBe(1);
    sync?.relaxed(() => insert.run(4));
    await sync?.close(); // does not leave it waiting
    expect(flushes).toBe(2);
    db.close();
  });

  it("a failed background flush is final: every later append is refused with journalNotDurable", async () => {
    const db = new Database(path);
    db.pragma("journal_mode = WAL");
    db.exec("CREATE TABLE t (x)");
    const sync = walSync(db, "full", {
      flushFile: (_fd, done) => done(Object.assign(new Error("EIO: i/o error"), { code: "EIO" })),
    });
    sync?.relaxed(() => db.prepare("INSERT INTO t VALUES (1)").run());
    await sync?.close();
    let thrown: unknown;
    try {
      sync?.check("r-9");
    } catch (e) {
      thrown = e;
    }
    expect(isJournalFileError(thrown)).toBe(true);
    expect(thrown).toMatchObject({
      code: "journalNotDurable",
      message: expect.stringMatching(/^run r-9: .*EIO.*reopen the journal/),
    });
    db.close();
  });

  it("is not used where it would not be as safe: a file at normal, an in-memory database", () => {
    const db = new Database(":memory:");
    expect(walSync(db, "full")).toBeUndefined();
    db.close();
    const file = new Database(path);
    expect(walSync(file, "normal")).toBeUndefined();
    expect(walSync(file, undefined)).toBeUndefined(); // a database handed in: its settings are the caller's
    file.close();
  });

  it("a relaxed acquire and append survive a crash of the process (SIGKILL right after they returned)", async () => {
    const fixture = fileURLToPath(new URL("../fixtures/relaxedAppendKill.ts", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", fixture, path], {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += String(d);
      if (out.includes("appended")) child.kill("SIGKILL");
    });
    await once(child, "exit");
    expect(out).toContain("appended");
    const store = sqliteStore(path);
    const entries = await store.read("r");
    expect(entries.map((e) => e.type)).toEqual(["decision.recorded"]);
    // The killed owner's lease was kept: its pid is gone, so the run is taken over at once, with the next token.
    const lease = await store.acquire("r", { owner: "next", leaseMs: 1000 });
    expect(lease.token).toBe(2);
    await store.close();
  });
});

import { copyFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { beforeAll, describe, expect, it } from "vitest";
import { runDemoSession } from "../../src/cli/demo/session.ts";
import { packageRoot } from "../../src/cli/packageRoot.ts";
import { agentLoop$, openSqliteJournal, readJournal, rebuildToolCallLog, scriptedModel } from "../../src/index.ts";
import { digestOf, foldRun, resolveStep } from "../../src/journal.ts";
import { demoJournal, loom, tempDir } from "./support.ts";

const dir = tempDir();
let fixture = "";
let copies = 0;
/** A fresh copy of the fixture journal, for a test that changes it. */
const copy = () => {
  const db = join(dir, `copy-${copies++}.db`);
  copyFileSync(fixture, db);
  return db;
};
const withJournal = async <T>(db: string, fn: (j: ReturnType<typeof openSqliteJournal>) => Promise<T>) => {
  const journal = openSqliteJournal(db);
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
};

beforeAll(async () => {
  fixture = await demoJournal(dir, 6, 3);
});

describe("loom runs", () => {
  it("lists every run with its loop, status, model calls and log shape", async () => {
    const { code, stdout } = await loom(dir, ["runs", "--db", fixture]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^run\s+loop\s+status\s+model calls\s+tokens in\/out\s+entries\s+journal\s+log\s+started/);
    expect(stdout).toMatch(/done-1\s+loom-demo\s+completed\s+7\s/);
    // Its process was killed mid-run: nobody owns it, so it is stalled, not running (issue 36).
    expect(stdout).toMatch(/crashed-1\s+loom-demo\s+stalled\s+4\s.*resume with loom resume 'crashed-1'$/m);
  });

  it("sums the tokens each model call recorded (input/output), in the table and in --json", async () => {
    const db = join(dir, "tokens.db");
    await withJournal(db, async (journal) => {
      const loop = agentLoop$({
        id: "counted",
        model: scriptedModel([
          { toolCalls: [{ id: "a", name: "ping", input: {} }], usage: { inputTokens: 1200, outputTokens: 30 } },
          { content: "pong", toolCalls: [], usage: { inputTokens: 1300, outputTokens: 12 } },
        ]),
        tools: { ping: { description: "pings", execute: () => "pong" } },
      });
      await loop.run({ runId: "tok-1", journal, input: "ping" });
    });
    const { stdout } = await loom(dir, ["runs", "--db", db]);
    expect(stdout).toMatch(/tok-1\s+counted\s+completed\s+2\s+2,500\/42\s/);
    const [run] = JSON.parse((await loom(dir, ["runs", "--db", db, "--json"])).stdout);
    expect(run.tokens).toEqual({ input: 2500, output: 42 });
  });

  it("prints JSON for scripts", async () => {
    const runs = JSON.parse((await loom(dir, ["runs", "--db", fixture, "--json"])).stdout);
    expect(runs.map((r: { runId: string }) => r.runId).sort()).toEqual(["crashed-1", "done-1"]);
    expect(runs.find((r: { runId: string }) => r.runId === "done-1")).toMatchObject({
      loopId: "loom-demo",
      status: "completed",
      iterations: 7,
      mode: "lean",
    });
  });

  it("fails in one line when the journal file does not exist, and creates nothing", async () => {
    const { code, stderr } = await loom(dir, ["runs", "--db", "nowhere.db"]);
    expect(code).toBe(1);
    expect(stderr).toBe(
      `loom: no journal at ${join(dir, "nowhere.db")}: run \`npm run demo\` to make one, or pass --db <file> (the SQLite file your program journals to)\n`,
    );
  });
});

describe("loom log", () => {
  it("prints the log in the run's recorded shape (lean) by default", async () => {
    const { code, stdout } = await loom(dir, ["log", "done-1", "--db", fixture]);
    expect(code).toBe(0);
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toBe(
      "run done-1 · loop loom-demo · completed · 7 model calls · 6 tool calls · lean log (recorded shape: lean)",
    );
    expect(lines[1]).toMatch(/^iter\s+tool\s+status\s+bytes\s+digest\s+stepId$/);
    expect(lines).toHaveLength(2 + 6);
    expect(lines[2]).toMatch(/^\s+0\s+read_file\s+ok\s+[\d,]+\s+[0-9a-f]{12}…\s+loom-demo#turn:0:tool:0$/);
  });

  it("--json gives the log the run returned; --mode full --json the full shape rebuilt from the journal", async () => {
    const lean = JSON.parse((await loom(dir, ["log", "done-1", "--db", fixture, "--json"])).stdout);
    const full = JSON.parse((await loom(dir, ["log", "done-1", "--db", fixture, "--mode", "full", "--json"])).stdout);
    await withJournal(fixture, async (journal) => {
      // What the loop returned: a completed run called again returns its value, calling nothing.
      const returned = await runDemoSession({ journal, runId: "done-1", root: packageRoot(), turns: 6 });
      expect(returned.modelCalls + returned.toolCalls).toBe(0);
      expect(lean).toEqual(returned.output.toolCallLog);
      expect(full).toEqual(await rebuildToolCallLog(journal, "done-1", "full"));
    });
    expect(full[0]).toHaveProperty("toolOutput.path");
  });

  it("shows only the calls that ended in a crashed run", async () => {
    const { stdout } = await loom(dir, ["log", "crashed-1", "--db", fixture]);
    expect(stdout.split("\n")[0]).toBe(
      "run crashed-1 · loop loom-demo · running · 4 model calls · 3 tool calls · lean log (recorded shape: lean)",
    );
  });

  it("fails in one line for an unknown run, exits 2 for a bad --mode", async () => {
    expect(await loom(dir, ["log", "nope", "--db", fixture])).toMatchObject({
      code: 1,
      stderr: `loom: no run "nope" in ${fixture}; \`loom runs\` lists the runs it holds\n`,
    });
    const bad = await loom(dir, ["log", "done-1", "--db", fixture, "--mode", "compact"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /^loom: option '--mode <mode>' argument 'compact' is invalid\. Allowed choices are full, lean\./,
    );
  });
});

describe("loom show", () => {
  const step = "loom-demo#turn:2:tool:0";

  it("prints the step's output with its digest, verified by the prompt digest of the next model call", async () => {
    const { code, stdout } = await loom(dir, ["show", step, "--run", "done-1", "--db", fixture]);
    expect(code).toBe(0);
    const resolved = await withJournal(fixture, (j) => resolveStep(j, step, { runId: "done-1" }));
    expect(stdout).toContain(`digest  ${resolved.digest} (`);
    expect(stdout).toContain(
      "verified: the digest its frame recorded; the prompt digest of the next model call (loom-demo#turn:3:model) covers it",
    );
    expect(stdout).toContain(`tool    checksum_tree (iteration 2), status ok, read from the frame`);
    expect(JSON.parse(stdout.slice(stdout.indexOf("output:\n") + 8))).toEqual(resolved.output);
  });

  it("--json holds the resolved step", async () => {
    const shown = JSON.parse((await loom(dir, ["show", step, "--run", "done-1", "--db", fixture, "--json"])).stdout);
    const resolved = await withJournal(fixture, (j) => resolveStep(j, step, { runId: "done-1" }));
    expect(shown).toMatchObject({ ...resolved, toolName: "checksum_tree", iteration: 2 });
  });

  it("asks for --run when several runs hold the step", async () => {
    const { code, stderr } = await loom(dir, ["show", "loom-demo#turn:0:tool:0", "--db", fixture]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/^loom: step loom-demo#turn:0:tool:0 exists in runs .*; pass --run <runId>\n$/);
  });

  /** Rewrites the tool frame.completed row of `step` in run done-1 of `db`: its output, and the digest it recorded. */
  const rewriteFrame = (db: string, output: unknown, recorded: { digest: string | null; bytes: number }) => {
    const sql = new Database(db);
    // The row keeps `<bytes>,"output":<output JSON>` in `data`, the frame id and the digest in columns.
    const changes = sql
      .prepare(
        `UPDATE loom_entries SET digest = ?, data = ?
          WHERE run = (SELECT run FROM loom_runs WHERE run_id = 'done-1') AND frame = ? AND effect IS NULL`,
      )
      .run(
        Buffer.from(recorded.digest ?? "", "hex"),
        `${recorded.bytes},"output":${JSON.stringify(output)}`,
        step,
      ).changes;
    sql.close();
    expect(changes).toBe(1);
  };

  it("fails when the output was edited in the journal: it no longer hashes to the digest its frame recorded", async () => {
    const db = copy();
    const { output, digest, bytes } = await withJournal(db, (j) => resolveStep(j, step, { runId: "done-1" }));
    rewriteFrame(db, { ...(output as object), edited: 1 }, { digest, bytes });
    const { code, stderr } = await loom(dir, ["show", step, "--run", "done-1", "--db", db]);
    expect(code).toBe(1);
    expect(stderr).toMatch(
      /^loom: run done-1: step loom-demo#turn:2:tool:0's output hashes to [0-9a-f]{64} \(\d+ bytes\), not the [0-9a-f]{64} \(\d+ bytes\) its frame recorded; the journal was altered/,
    );
  });

  it("fails when output and recorded digest were both edited: the next model call's prompt digest no longer covers them", async () => {
    const db = copy();
    const { output } = await withJournal(db, (j) => resolveStep(j, step, { runId: "done-1" }));
    const forged = { ...(output as object), edited: 1 };
    rewriteFrame(db, forged, digestOf(forged));
    const { code, stderr } = await loom(dir, ["show", step, "--run", "done-1", "--db", db]);
    expect(code).toBe(1);
    expect(stderr).toBe(
      "loom: run done-1: what was fed back after model call 2 no longer hashes to the prompt digest loom-demo#turn:3:model recorded; the journal was altered: restore it from a backup\n",
    );
  });

  it("a step of a run that stopped before its next model call: only the digest its frame recorded vouches for it", async () => {
    const db = copy();
    await withJournal(db, async (journal) => {
      const entries = await readJournal(journal, "done-1");
      const cut = entries.findIndex((e) => e.type === "frame.completed" && e.data.frameId === step);
      const kept = entries.slice(0, cut + 1).map(({ type, data }) => ({ type, data }) as never);
      await journal.store.append("cut-1", kept, { expectedVersion: 0 });
    });
    const { code, stdout } = await loom(dir, ["show", step, "--run", "cut-1", "--db", db]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/\n {8}verified: the digest its frame recorded\n/);
  });
});

describe("loom compact", () => {
  it("moves old tool frames to the archive; log and show still read them, verified", async () => {
    const db = copy();
    const before = await withJournal(db, (j) => rebuildToolCallLog(j, "done-1", "full"));
    const { code, stdout } = await loom(dir, ["compact", "done-1", "--keep-turns", "2", "--db", db]);
    expect(code).toBe(0);
    expect(stdout).toMatch(
      /^run done-1: moved 5 tool frames to archive sha256:[0-9a-f]{64}, kept the last 2 turns in the journal\n {2}journal: 29 → 20 entries, /,
    );
    const full = JSON.parse((await loom(dir, ["log", "done-1", "--mode", "full", "--json", "--db", db])).stdout);
    expect(full).toEqual(before);
    const shown = await loom(dir, ["show", "loom-demo#turn:0:tool:0", "--run", "done-1", "--db", db]);
    expect(shown.stdout).toContain("read from the archive");
    expect(shown.stdout).toContain(
      "verified: the digest in the compaction's frames.archived marker; the prompt digest of the next model call (loom-demo#turn:1:model) covers it",
    );
    expect((await loom(dir, ["compact", "done-1", "--keep-turns", "2", "--db", db])).stdout).toMatch(
      /nothing to compact/,
    );
  });

  it("exits 2 without --keep-turns or with a bad value", async () => {
    for (const args of [[], ["--keep-turns", "-1"], ["--keep-turns", "two"]]) {
      const { code, stderr } = await loom(dir, ["compact", "done-1", "--db", fixture, ...args]);
      expect(code).toBe(2);
      expect(stderr.trim().split("\n")).toHaveLength(1);
    }
  });
});

describe("loom resume", () => {
  it("finishes a crashed run of the demo's loop, running the unknown-outcome step again", async () => {
    const db = copy();
    const { code, stdout } = await loom(dir, ["resume", "crashed-1", "--db", db]);
    expect(code).toBe(0);
    expect(stdout).toMatch(
      /^run crashed-1 completed: this resume ran 3 model calls and 3 tool calls, the rest was served from the journal\.\n/,
    );
    await withJournal(db, async (journal) => {
      const entries = await readJournal(journal, "crashed-1");
      // The frame started before the crash is completed by the resume (its tool ran again: 3 tool calls above),
      // after a second, fenced frame.started: the attempt is journaled before the tool runs.
      const frame = entries.filter((e) => "frameId" in e.data && e.data.frameId === "loom-demo#turn:3:tool:0");
      expect(frame.map((e) => e.type)).toEqual(["frame.started", "frame.started", "frame.completed"]);
      expect((await foldRun(journal, "crashed-1")).status).toBe("completed");
      expect(await rebuildToolCallLog(journal, "crashed-1", "lean")).toHaveLength(6);
    });
  });

  it("runs nothing for a completed run", async () => {
    const { code, stdout } = await loom(dir, ["resume", "done-1", "--db", fixture]);
    expect(code).toBe(0);
    expect(stdout).toMatch(
      /^run done-1 had already completed; nothing was run\. Its answer:\n {2}Surveyed the package in 6 tool calls/,
    );
  });

  it("says so clearly for a run of a loop it does not define", async () => {
    const db = copy();
    await withJournal(db, (j) =>
      j.store.append("other-1", [{ type: "run.started", data: { loopId: "support", input: "hi", tools: [] } }], {
        expectedVersion: 0,
      }),
    );
    const { code, stderr } = await loom(dir, ["resume", "other-1", "--db", db]);
    expect(code).toBe(1);
    expect(stderr).toBe(
      'loom: run other-1 was recorded by loop "support", which this command does not define (it resumes loom-demo); resume it from the program that defines that loop: loop.run({ runId: "other-1", journal })\n',
    );
  });
});

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { loomCommand, packageRoot, runsFromClone } from "../../src/cli/packageRoot.ts";
import { agentLoop$, type OpenJournal, openSqliteJournal, readJournal, scriptedModel } from "../../src/index.ts";
import { demoJournal, freePort, loom, tempDir } from "./support.ts";

/** What a new user meets: errors that name the file and the fix, advice that works where they are, output that adds up. */

const dir = tempDir("loom-first-contact-");
let db = "";
let shop = "";

/** A shop loop: `lookup` runs freely, `refund` asks for approval. */
const shopLoop = () =>
  agentLoop$({
    id: "shop",
    model: scriptedModel([
      { content: "look", toolCalls: [{ id: "a", name: "lookup", input: { q: 1 } }] },
      {
        content: "refund",
        toolCalls: [
          { id: "b", name: "refund", input: { order: 7 } },
          { id: "c", name: "lookup", input: { q: 2 } },
        ],
      },
      { content: "done", toolCalls: [] },
    ]),
    tools: {
      lookup: { description: "looks up", execute: (input) => ({ found: input }) },
      refund: { description: "refunds", requiresApproval: true, execute: () => ({ refunded: true }) },
    },
  });

async function withFile<T>(path: string, fn: (journal: OpenJournal) => Promise<T>): Promise<T> {
  const journal = openSqliteJournal(path);
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
}

beforeAll(async () => {
  db = await demoJournal(dir, 2, 1);
  shop = join(dir, "shop.db");
  await withFile(shop, async (journal) => {
    await shopLoop()
      .run({ runId: "pending-1", journal, input: "refund order 7" })
      .catch(() => {});
    await shopLoop()
      .run({ runId: "approved-1", journal, input: "refund order 7" })
      .catch(() => {});
    await shopLoop().run({ runId: "approved-1", journal, approvals: { "shop#turn:1:tool:0": true } });
    // A copy of the approved run whose first tool frame records another digest than its output's.
    const entries = await readJournal(journal, "approved-1");
    const altered = entries.map(({ type, data }) =>
      type === "frame.completed" && data.frameId === "shop#turn:0:tool:0"
        ? { type, data: { ...data, digest: "0".repeat(64) } }
        : { type, data },
    );
    await journal.store.append("altered-1", altered as never, { expectedVersion: 0 });
    // One model call, one tool call: counts of one.
    const one = agentLoop$({
      id: "one",
      model: scriptedModel([{ toolCalls: [{ id: "x", name: "ping", input: {} }] }, { content: "pong", toolCalls: [] }]),
      tools: { ping: { description: "pings", execute: () => "pong" } },
    });
    await one.run({ runId: "one-1", journal, input: "ping" });
  });
});

const inspect = async (runId: string) =>
  loom(dir, ["inspect", runId, "--db", shop, "--once", "--no-wait", "--port", String(await freePort())]);

describe("loom inspect replays approvals as recorded", () => {
  it("an approval-pending run: every tool result matches, only the tool that asked waits, exit 0", async () => {
    const r = await inspect("pending-1");
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("ended interrupted (approval-pending)");
    expect(r.stdout).toContain("2/2 tool results match the journal");
    expect(r.code).toBe(0);
  });

  it("a run approved on resume replays to its end", async () => {
    const r = await inspect("approved-1");
    expect(r.stdout).toContain("ended completed");
    expect(r.stdout).toContain("3/3 tool results match the journal");
    expect(r.code).toBe(0);
  });

  it("a replay that does not match the journal exits 1, saying so", async () => {
    const r = await inspect("altered-1");
    expect(r.stdout).toContain("2/3 tool results match the journal");
    expect(r.stderr).toBe(
      "loom: the replay of run altered-1 does not match its journal: 2/3 tool results match (the inspector shows a run that differs from the recorded one)\n",
    );
    expect(r.code).toBe(1);
  });
});

describe("--db errors name the file and the fix", () => {
  it("a file that is not a database", async () => {
    const text = join(dir, "notes.txt");
    writeFileSync(text, "not a database\n".repeat(100));
    const r = await loom(dir, ["runs", "--db", text]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `loom: ${text} is not a Loom journal (not a SQLite database: file is not a database); pass the SQLite file your program journals to (--db <file> names the journal; the default is ./loom.db)\n`,
    );
  });

  it("a folder given as the file", async () => {
    const folder = join(dir, "a-folder");
    mkdirSync(folder);
    const r = await loom(dir, ["log", "done-1", "--db", folder]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `loom: ${folder} is a folder: --db takes the journal's file (for example ${folder}/loom.db)\n`,
    );
  });

  it("the demo's worker passes its own error through (no 'Node.js v20' tail)", async () => {
    const nowhere = join(dir, "no", "such", "folder", "loom.db");
    const r = await loom(dir, ["demo", "--turns", "2", "--db", nowhere]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`loom: the demo's worker failed: cannot open the journal file ${nowhere}`);
    expect(r.stderr).not.toContain("Node.js");
  }, 30_000);
});

describe("advice that works where Loom runs", () => {
  it("in this clone: npm run loom -- …; installed (no sources beside it): npx loom …", () => {
    expect(runsFromClone(packageRoot())).toBe(true);
    expect(loomCommand("runs", packageRoot())).toBe("npm run loom -- runs");
    const installed = join(dir, "node_modules", "loom");
    mkdirSync(join(installed, "dist", "cli"), { recursive: true });
    writeFileSync(
      join(installed, "package.json"),
      JSON.stringify({ name: "loom", bin: { loom: "./dist/cli/bin.js" } }),
    );
    expect(runsFromClone(installed)).toBe(false);
    expect(loomCommand("log demo-1 --mode full", installed)).toBe("npx loom log demo-1 --mode full");
  });
});

describe("small things that add up", () => {
  it("loom show on a model step names it as one (no 'tool ? (iteration ?)')", async () => {
    const r = await loom(dir, ["show", "loom-demo#turn:1:model", "--run", "done-1", "--db", db]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("\nmodel   the model's response (iteration 1), status ok, read from the frame\n");
    expect(r.stdout).not.toContain("?");
    const json = await loom(dir, ["show", "loom-demo#turn:1:model", "--run", "done-1", "--db", db, "--json"]);
    expect(JSON.parse(json.stdout)).toMatchObject({ kind: "model", iteration: 1 });
  });

  it("counts of one are singular", async () => {
    const log = await loom(dir, ["log", "one-1", "--db", shop]);
    expect(log.stdout).toContain(" · 2 model calls · 1 tool call · ");
    const resume = await loom(dir, ["resume", "one-1", "--db", shop]);
    expect(resume.stdout).toContain("  2 model calls, 1 tool call in all");
  });

  it("loom machine takes no --db (it reads no journal)", async () => {
    const r = await loom(dir, ["machine", "modePin", "--mermaid", "--db", "x.db"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("loom: unknown option '--db' (see --help)\n");
  });

  it("--json errors are JSON on stdout, { error: { code, message } }, exit 1 (2 for a usage error); stderr stays empty", async () => {
    const missing = await loom(dir, ["runs", "--json", "--db", join(dir, "missing.db")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe("");
    expect(JSON.parse(missing.stdout)).toEqual({
      error: { code: "noJournal", message: expect.stringContaining(`no journal at ${join(dir, "missing.db")}`) },
    });
    const unknown = await loom(dir, ["log", "nope", "--json", "--db", db]);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stdout).error.code).toBe("unknownRun");
    const usage = await loom(dir, ["log", "done-1", "--json", "--mode", "wide", "--db", db]);
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.stdout).error).toMatchObject({ code: "usage", message: expect.stringContaining("--mode") });
  });

  it.each([["99999"], ["0"], ["80.5"], ["http"], ["-1"]])(
    "--port %s: a usage error that gives the range (exit 2)",
    async (port) => {
      const r = await loom(dir, ["inspect", "done-1", "--db", db, "--once", "--port", port]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`expected a whole number from 1 to 65535, got "${port}"`);
    },
  );
});

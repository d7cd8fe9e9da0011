import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { agentLoop$, diffJournaledRuns, openSqliteJournal, type RunDiff, scriptedModel } from "../../src/index.ts";
import { loom, tempDir } from "./support.ts";

const dir = tempDir();
const db = join(dir, "runs.db");
const replays = join(dir, "replays.db");

/** A run of a little shop agent: search, then fetch what it found, then answer. */
async function shopRun(file: string, runId: string, query: string, fetchId: number, answer: string) {
  const journal = openSqliteJournal(file);
  try {
    const loop = agentLoop$({
      id: "shop",
      model: scriptedModel([
        { toolCalls: [{ id: "c1", name: "search", input: { q: query, limit: 5 } }] },
        { toolCalls: [{ id: "c2", name: "fetch", input: { id: fetchId } }] },
        { content: answer },
      ]),
      tools: {
        search: { description: "search", execute: async (input: unknown) => ({ hits: [(input as { q: string }).q] }) },
        fetch: { description: "fetch", execute: async (input: unknown) => ({ item: (input as { id: number }).id }) },
      },
    });
    await loop.run({ runId, journal, input: "find me shoes" });
  } finally {
    await journal.close();
  }
}

beforeAll(async () => {
  await shopRun(db, "a", "shoes", 1, "Here are shoes.");
  await shopRun(db, "same", "shoes", 1, "Here are shoes.");
  await shopRun(db, "b", "boots", 1, "Here are boots.");
  await shopRun(replays, "a", "shoes", 2, "Here are shoes.");
});

describe("loom diff", () => {
  it("says two runs that made the same calls with the same results are identical, and exits 0", async () => {
    const { code, stdout } = await loom(dir, ["diff", "a", "same", "--db", db, "--fail-on-diff"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^a → same · identical · strict: pass/);
  });

  it("names the first divergence and the changed input, and fails on it when asked", async () => {
    const { code, stdout, stderr } = await loom(dir, ["diff", "a", "b", "--db", db, "--fail-on-diff"]);
    expect(code).toBe(1);
    expect(stdout).toContain("first divergence: turn 0");
    expect(stdout).toMatch(/~ .*search/);
    expect(stdout).toContain('replace /q "boots"');
    expect(stderr).toContain("b does not match a (strict)");
  });

  it("reads the second run from another journal, and prints JSON a program can read", async () => {
    const { code, stdout } = await loom(dir, ["diff", "a", "a", "--db", db, "--against", replays, "--json"]);
    expect(code).toBe(0);
    const diff = JSON.parse(stdout) as RunDiff;
    expect(diff.counts).toMatchObject({ same: 1, "input-changed": 0, added: 1, removed: 1 });
    // The model asked for another fetch at turn 1: the call, not just "the model answered otherwise".
    expect(diff.firstDivergence).toMatchObject({ turn: 1, what: "tool-calls" });
    expect(diff.deltas.modelCalls).toEqual({ a: 3, b: 3, delta: 0 });
  });

  it("refuses an unknown run and an unknown match mode, saying what to do", async () => {
    const unknown = await loom(dir, ["diff", "a", "nope", "--db", db]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no run "nope"');
    const mode = await loom(dir, ["diff", "a", "b", "--db", db, "--match", "loose"]);
    expect(mode.code).toBe(2);
  });
});

describe("diffJournaledRuns", () => {
  it("diffs runs of two journals as the CLI does", async () => {
    const a = openSqliteJournal(db, { readonly: true });
    const b = openSqliteJournal(replays, { readonly: true });
    try {
      const diff = await diffJournaledRuns({ journal: a, runId: "a" }, { journal: b, runId: "a" }, { match: "subset" });
      expect(diff.pass).toBe(false);
      expect(diff.calls.map((c) => c.change)).toEqual(["same", "removed", "added"]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

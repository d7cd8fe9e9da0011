import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { agentLoop$, openSqliteJournal, scriptedModel, type Tool } from "../../src/index.ts";
import { demoJournal, freePort, loom, tempDir } from "../cli/support.ts";

/**
 * Names a user types (a step id, a run's recorded loop id) are looked up in tables keyed by name:
 * none of them may reach Object.prototype (`constructor`, `__proto__`, `toString`).
 */

const NAMES = ["constructor", "__proto__", "toString", "hasOwnProperty"];
const dir = tempDir("loom-lookups-");
let db = "";
beforeAll(async () => {
  db = await demoJournal(dir, 3, 1);
  // Runs recorded by loops whose ids are prototype names: the CLI does not define those loops.
  const journal = openSqliteJournal(db);
  try {
    for (const loopId of NAMES) {
      await journal.store.append(
        `run-${loopId}`,
        [{ type: "run.started", data: { loopId, input: "hello", tools: [] } }],
        { expectedVersion: 0 },
      );
    }
    // A run whose tools are named like prototype members, each called once.
    const tools: Record<string, Tool> = Object.fromEntries(
      NAMES.map((name): [string, Tool] => [name, { description: name, execute: () => ({ tool: name }) }]),
    );
    const model = scriptedModel([
      { toolCalls: NAMES.map((name, i) => ({ id: `c${i}`, name, input: {} })) },
      { content: "done", toolCalls: [] },
    ]);
    await agentLoop$({ id: "protos", model, tools }).run({ runId: "tools-1", journal, input: "call them" });
  } finally {
    await journal.close();
  }
});

describe("lookups by user-given names never reach the prototype", () => {
  it.each(NAMES)("loom show %s: no such step (exit 1), no made-up step", async (name) => {
    const r = await loom(dir, ["show", name, "--db", db]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`no run of this journal has a step ${name}`);
  });

  it.each(NAMES)("loom resume of a run of loop %s: the loop is unknown (exit 1), no TypeError", async (loopId) => {
    const r = await loom(dir, ["resume", `run-${loopId}`, "--db", join(dir, "loom.db")]);
    expect(r.stderr).not.toContain("TypeError");
    expect(r.stderr).toContain(`was recorded by loop "${loopId}", which this command does not define`);
    expect(r.code).toBe(1);
  });

  it("loom inspect replays tools named __proto__, constructor…: every result matches (exit 0)", async () => {
    const port = await freePort();
    const r = await loom(dir, ["inspect", "tools-1", "--db", db, "--once", "--no-wait", "--port", String(port)]);
    expect(r.stdout).toContain(`${NAMES.length}/${NAMES.length} tool results match the journal`);
    expect(r.code).toBe(0);
  });

  it.each(NAMES)("loom machine %s: a usage error naming the machines", async (name) => {
    const r = await loom(dir, ["machine", name, "--mermaid"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`no machine "${name}"`);
  });
});

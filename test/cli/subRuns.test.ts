import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ModelResponse } from "../../src/events/types.ts";
import { agentLoop$, agentTool, openSqliteJournal, scriptedModel, type Tool } from "../../src/index.ts";
import { loom, tempDir } from "./support.ts";

const dir = tempDir("loom-cli-subruns-");
const CHILD = "trip/planner#turn:0:tool:0";
const GRANDCHILD = `${CHILD}/researcher#turn:0:tool:0`;

const ask = (name: string, input: unknown): ModelResponse => ({ toolCalls: [{ id: `${name}-1`, name, input }] });

/** A journal with `trip`: planner → researcher → booker, whose `book` tool waits for an approval. */
async function tripJournal(file: string) {
  const book: Tool = { description: "books", requiresApproval: true, execute: () => "booked" };
  const booker = agentLoop$({
    id: "booker",
    model: scriptedModel([ask("book", { day: "May 3" }), { content: "booked", toolCalls: [] }]),
    tools: { book },
  });
  const researcher = agentLoop$({
    id: "researcher",
    model: scriptedModel([ask("booking", { prompt: "book it" }), { content: "done", toolCalls: [] }]),
    tools: { booking: agentTool(booker, { description: "books" }) },
  });
  const planner = agentLoop$({
    id: "planner",
    model: scriptedModel([ask("research", { prompt: "Lisbon" }), { content: "planned", toolCalls: [] }]),
    tools: { research: agentTool(researcher, { description: "researches" }) },
  });
  const solo = agentLoop$({ id: "solo", model: scriptedModel([{ content: "hi", toolCalls: [] }]) });
  const journal = openSqliteJournal(file);
  try {
    await solo.run({ runId: "a-solo", journal, input: "hi" });
    await planner.run({ runId: "trip", journal, input: "plan" }).catch(() => undefined);
  } finally {
    await journal.close();
  }
}

describe("loom runs and loom show: sub-agents' runs", () => {
  it("loom runs shows each sub-agent's run indented under its parent, and --json names the parent", async () => {
    const db = join(dir, "tree.db");
    await tripJournal(db);
    const { code, stdout } = await loom(dir, ["runs", "--db", db]);
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split("\n").slice(1);
    const starts = ["a-solo ", "trip ", `└ ${CHILD} `, `  └ ${GRANDCHILD} `];
    expect(lines.map((line, i) => line.startsWith(starts[i] ?? "?"))).toEqual([true, true, true, true]);
    expect(stdout).toMatch(/└ trip\/planner#turn:0:tool:0\s+researcher\s+waiting for approval/);
    const runs = JSON.parse((await loom(dir, ["runs", "--db", db, "--json"])).stdout);
    expect(runs.map((r: { runId: string; parent?: unknown }) => [r.runId, r.parent])).toEqual([
      ["a-solo", undefined],
      ["trip", undefined],
      [CHILD, { runId: "trip", stepId: "planner#turn:0:tool:0" }],
      [GRANDCHILD, { runId: CHILD, stepId: "researcher#turn:0:tool:0" }],
    ]);
  });

  it("loom show <parent> links the sub-agent's run under its call and names where the approval waits", async () => {
    const db = join(dir, "show.db");
    await tripJournal(db);
    const { code, stdout } = await loom(dir, ["show", "trip", "--db", db]);
    expect(code).toBe(0);
    expect(stdout).toContain("tool research planner#turn:0:tool:0: waiting for approval"); // its sub-agent waits
    expect(stdout).toContain(`└ sub-agent researcher interrupted, 1 model call: loom show '${CHILD}'`);
    expect(stdout).toContain(
      `waiting booker#turn:0:tool:0 (book) in sub-agent run ${GRANDCHILD} for approval: loom approve 'booker#turn:0:tool:0' --run '${GRANDCHILD}'`,
    );
    const child = await loom(dir, ["show", CHILD, "--db", db]);
    expect(child.stdout).toContain("parent  trip, its call planner#turn:0:tool:0 (a sub-agent's run)");
    expect(child.stdout).toContain(`└ sub-agent booker interrupted, 1 model call: loom show '${GRANDCHILD}'`);
    const json = JSON.parse((await loom(dir, ["show", "trip", "--db", db, "--json"])).stdout);
    expect(json.story.turns[0].tools[0].subRun).toEqual({
      runId: CHILD,
      loopId: "researcher",
      status: "interrupted",
      iterations: 1,
    });
    // The approval it names is answered as printed, and listed no more.
    const approved = await loom(dir, ["approve", "booker#turn:0:tool:0", "--run", GRANDCHILD, "--db", db]);
    expect(approved.code, approved.stderr).toBe(0);
    expect((await loom(dir, ["approvals", "--db", db])).stdout).toContain("no tool call waits for approval");
  });

  it("loom approvals names the parent run and call a sub-agent's approval waits under; loom cancel lists the sub-runs it cancelled", async () => {
    const db = join(dir, "text.db");
    await tripJournal(db);
    const listed = await loom(dir, ["approvals", "--db", db]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(
      `booker#turn:0:tool:0 waits in the sub-agent run ${GRANDCHILD}, under run ${CHILD}'s call researcher#turn:0:tool:0: answer it with --run '${GRANDCHILD}', then resume run trip`,
    );
    const help = await loom(dir, ["approvals", "--help"]);
    expect(help.stdout).toContain("parent run and call it waits under");

    const cancelled = await loom(dir, ["cancel", "trip", "--reason", "plans changed", "--db", db]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stdout.trimEnd().split("\n")).toEqual([
      "run trip: cancelled",
      `  └ sub-agent run ${CHILD}: cancelled`,
      `  └ sub-agent run ${GRANDCHILD}: cancelled`,
    ]);
    expect((await loom(dir, ["cancel", "--help"])).stdout).toContain("sub-agents' runs are cancelled with it");
  });
});

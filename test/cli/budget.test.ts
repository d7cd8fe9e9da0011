import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { agentLoop$, openSqliteJournal, scriptedModel, type Tool } from "../../src/index.ts";
import { startViewer } from "../../src/viewer/server.ts";
import { loom, tempDir } from "./support.ts";

/** A run stopped by its token budget after two model calls, in a journal file. */
async function budgetStopped(db: string): Promise<void> {
  const journal = openSqliteJournal(db);
  try {
    const add: Tool = { description: "adds", execute: () => 1 };
    const model = scriptedModel(({ turn }) => ({
      toolCalls: [{ id: `c${turn}`, name: "add", input: {} }],
      usage: { inputTokens: 100, outputTokens: 7 },
    }));
    const loop = agentLoop$({ id: "spender", model, tools: { add } });
    await loop.run({ runId: "b-1", journal, input: "go", budget: { inputTokens: 200 } }).catch(() => {});
  } finally {
    await journal.close();
  }
}

describe("a budget stop, as the CLI and the viewer show it", () => {
  it("loom show and loom runs say which limit was reached and the figures", async () => {
    const dir = tempDir("loom-cli-budget-");
    const db = join(dir, "b.db");
    await budgetStopped(db);
    const figures = "inputTokens 200 of 200 reached; used 2 model calls, 200 in / 14 out tokens, cost 0";
    const show = await loom(dir, ["show", "b-1", "--db", db]);
    // The ending in the words of the one read layer (src/read/timeline.ts), as the viewer says it.
    const ending = `interrupted: budget: ${figures}. Raise the budget and resume the run`;
    expect(show.stdout).toContain(`stopped ${ending}`);
    const runs = await loom(dir, ["runs", "--db", db]);
    expect(runs.stdout).toContain("budget: inputTokens 200 of 200 reached");
    const [run] = JSON.parse((await loom(dir, ["runs", "--db", db, "--json"])).stdout);
    expect(run.interrupted).toMatchObject({
      reason: "budget",
      budget: { limit: "inputTokens", limits: { inputTokens: 200 } },
    });
    const journal = openSqliteJournal(db, { readonly: true });
    const viewer = await startViewer({ journal });
    try {
      const page = await (await fetch(`${viewer.url}/runs/b-1`)).text();
      expect(page).toContain(`<tr class="end interrupted"><td colspan="7">${ending}</td></tr>`);
    } finally {
      await viewer.stop();
      await journal.close();
    }
  });
});

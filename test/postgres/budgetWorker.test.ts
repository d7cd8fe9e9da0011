import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { dropSchema, freshSchema, PG_URL, sleep, sql, until } from "./pg.ts";

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("a worker's run stopped by its budget", () => {
  const url = PG_URL as string;
  const schema = freshSchema("budget_worker");
  let journal: OpenJournal;
  beforeAll(() => {
    journal = openPostgresJournal(url, { schema });
  });
  afterAll(async () => {
    await journal.close();
    await dropSchema(schema);
  });

  it("is finished for now: interrupted once, not handed back to be retried, and resumable once the budget is raised", async () => {
    const model = scriptedModel(({ turn }) =>
      turn < 3
        ? { toolCalls: [{ id: `c${turn}`, name: "work", input: {} }], usage: { inputTokens: 50, outputTokens: 5 } }
        : { content: "ok", toolCalls: [] },
    );
    const work = { description: "works", execute: () => ({ done: true }) };
    const spender = agentLoop$({ id: "spender", model, tools: { work }, budget: { modelCalls: 2 } });
    await submitRun(journal, { runId: "spend", loop: spender, input: "x" });
    const worker = startWorker({ journal, loops: { spender }, leaseMs: 600, pollMs: 10, onError: () => {} });
    const types = async () => (await readJournal(journal, "spend")).map((e) => e.type);
    await until("the budget stop", async () => (await types()).at(-1) === "run.interrupted");
    await sleep(300); // polls enough to have picked it again, were it handed back
    await worker.stop();
    expect((await types()).filter((t) => t === "run.interrupted")).toHaveLength(1);
    expect(model.calls).toBe(2);
    const leases = await sql(`SELECT run_id FROM "${schema}".loom_leases WHERE run_id = 'spend'`);
    expect(leases).toEqual([]);
    // Raised (here by the caller's own budget), the run goes on where it stopped.
    const out = await spender.run({ runId: "spend", journal, budget: { modelCalls: 10 } });
    expect(out.content).toBe("ok");
    expect(model.calls).toBe(4);
  });
});

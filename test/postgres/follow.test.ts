import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { postgresStore } from "../../src/postgres.ts";
import { type RunEvent, runEventsOf } from "../../src/projections/events.ts";
import { agentLoop$ } from "../../src/runtime/agentLoop.ts";
import { followRun } from "../../src/runtime/follow.ts";
import { dropSchema, freshSchema, PG_URL } from "./pg.ts";

const loopOf = (turns: number, delayMs: number) =>
  agentLoop$({
    id: "pgf",
    model: scriptedModel([
      ...Array.from({ length: turns }, (_, i) => ({
        content: `t${i}`,
        toolCalls: [{ id: `c${i}`, name: "wait", input: { i } }],
      })),
      { content: "over", toolCalls: [] },
    ]),
    tools: {
      wait: {
        description: "waits",
        execute: async (input) => {
          await new Promise((r) => setTimeout(r, delayMs));
          return { i: (input as { i: number }).i };
        },
      },
    },
  });

// Skipped without LOOM_PG_URL: there is no PostgreSQL server to follow a run on.
describe.skipIf(PG_URL === undefined)("followRun on PostgreSQL", () => {
  const url = PG_URL as string;
  let schema: string;
  beforeEach(() => {
    schema = freshSchema("follow");
  });
  afterEach(async () => {
    await dropSchema(schema);
  });

  it("follows a run written through another pool live (LISTEN/NOTIFY), and reconnects at every cursor", async () => {
    const writer = createJournal({ store: postgresStore(url, { schema }) });
    const reader = createJournal({ store: postgresStore(url, { schema }) });
    try {
      const arrivals: number[] = [];
      const events: RunEvent[] = [];
      const following = (async () => {
        for await (const e of followRun(reader, "pg-run", { pollMs: 60_000 })) {
          events.push(e);
          arrivals.push(Date.now());
        }
      })();
      await new Promise((r) => setTimeout(r, 50));
      await loopOf(4, 40).run({ runId: "pg-run", input: "go", journal: writer });
      await following;
      const all = runEventsOf(await readJournal(reader, "pg-run"));
      expect(events).toEqual(all);
      expect((arrivals.at(-1) as number) - (arrivals[0] as number)).toBeGreaterThan(80);
      for (const after of new Set(all.map((e) => e.cursor))) {
        const rest: RunEvent[] = [];
        for await (const e of followRun(reader, "pg-run", { after })) rest.push(e);
        expect(rest).toEqual(all.filter((e) => e.cursor > after));
      }
    } finally {
      await writer.close();
      await reader.close();
    }
  });
});

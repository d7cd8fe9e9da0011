import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { compact } from "../../src/events/compact.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { uncompactedEntries } from "../../src/events/readArchived.ts";
import type { Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal, postgresStore } from "../../src/postgres.ts";
import { type RunEvent, runEventsOf } from "../../src/projections/events.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { followRun } from "../../src/runtime/streaming/follow.ts";
import { dropSchema, freshSchema, PG_URL } from "./pg.ts";

const loopOf = (turns: number, delayMs: number, compactIn?: Journal) =>
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
        execute: async (input, { runId }) => {
          await new Promise((r) => setTimeout(r, delayMs));
          // Compacted while it runs (and while it is followed): the turns before this one move out.
          if (compactIn !== undefined) await compact(compactIn, runId as string, { keepTurns: 0 });
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
  it("follows a run compacted while it runs: the archived frames' events, at their cursors, once", async () => {
    const writer = openPostgresJournal(url, { schema });
    const reader = openPostgresJournal(url, { schema });
    try {
      const events: RunEvent[] = [];
      const following = (async () => {
        for await (const e of followRun(reader, "pg-compacted", { pollMs: 60_000 })) events.push(e);
      })();
      await new Promise((r) => setTimeout(r, 50));
      await loopOf(4, 20, writer).run({ runId: "pg-compacted", input: "go", journal: writer });
      await following;
      const hot = await readJournal(reader, "pg-compacted");
      expect(hot.filter((e) => e.type === "frames.archived").length).toBeGreaterThanOrEqual(3);
      const all = runEventsOf(await uncompactedEntries(reader, "pg-compacted", hot));
      expect(all.filter((e) => e.type === "tool-finished")).toHaveLength(4);
      expect(events).toEqual(all);
      for (const after of new Set(all.map((e) => e.cursor))) {
        const rest: RunEvent[] = [];
        for await (const e of followRun(reader, "pg-compacted", { after })) rest.push(e);
        expect(rest).toEqual(all.filter((e) => e.cursor > after));
      }
    } finally {
      await writer.close();
      await reader.close();
    }
  });
});

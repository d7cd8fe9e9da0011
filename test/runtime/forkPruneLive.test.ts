import { afterAll, describe, expect, it } from "vitest";
import { type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { isPruneNotSupportedError, pruneRuns } from "../../src/events/prune.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { forkRun } from "../../src/runtime/control/operations.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";
import { dropSchema, freshSchema, PG_URL, until } from "../postgres/pg.ts";

/**
 * Fork and prune while the run they name is running: a fork copies a prefix of the journal as it
 * stood at the seq asked for (the run appending on meanwhile) and runs to the end on its own; a
 * prune leaves alone any run whose ownership is held, finished or not.
 */

const tmp = tempDir("loom-fork-prune-live-");
const schemas: string[] = [];
afterAll(async () => {
  tmp.remove();
  for (const s of schemas) await dropSchema(s);
});

const TURNS = 40;

/** A loop whose tool takes a few ms a turn (so forks and prunes land mid-run), noting the turns it runs per run. */
function slowLoop(calls: Map<string, number[]>) {
  const model = scriptedModel(({ turn }) =>
    turn < TURNS
      ? { toolCalls: [{ id: `c${turn}`, name: "step", input: { n: turn } }] }
      : { content: "done", toolCalls: [] },
  );
  return agentLoop$({
    id: "live",
    model,
    tools: {
      step: {
        description: "takes a moment",
        execute: async (input: { n: number }, context: { runId?: string }) => {
          const seen = calls.get(context.runId ?? "") ?? [];
          seen.push(input.n);
          calls.set(context.runId ?? "", seen);
          await new Promise((r) => setTimeout(r, 3));
          return { n: input.n };
        },
      },
    },
    maxIterations: TURNS + 1,
  });
}

/** An entry without what a fork changes (its run id, its times, the fork's mark on run.started). */
const plain = (e: JournalEntry) => {
  const data = e.type === "run.started" ? { ...e.data, forkedFrom: undefined } : e.data;
  return JSON.stringify([e.seq, e.type, data]);
};

interface Backend {
  readonly name: string;
  readonly open: () => Promise<OpenJournal>;
}

const backends: Backend[] = [
  { name: "SQLite", open: async () => openSqliteJournal(tmp.file(`live-${Math.random().toString(36).slice(2)}.db`)) },
];
// Without LOOM_PG_URL there is no PostgreSQL server: the SQLite cases still run.
if (PG_URL !== undefined) {
  backends.push({
    name: "PostgreSQL",
    open: async () => {
      const schema = freshSchema("forklive");
      schemas.push(schema);
      return openPostgresJournal(PG_URL as string, { schema });
    },
  });
}

for (const backend of backends) {
  describe(`fork and prune of a running run (${backend.name})`, () => {
    it("each fork taken while the run appends holds exactly its entries before the seq asked, and runs to the end on its own", async () => {
      const journal = await backend.open();
      try {
        const calls = new Map<string, number[]>();
        const loop = slowLoop(calls);
        const running = loop.run({ runId: "src", journal, input: "go" });
        const forks: { id: string; at: number }[] = [];
        for (let i = 0; i < 5; i++) {
          await until(
            "the run to move on",
            async () => (await journal.store.read("src")).length >= 12 + i * 20,
            30_000,
            2,
          );
          const version = (await journal.store.read("src")).length;
          const id = `fork-${i}`;
          const made = await forkRun(journal, "src", { at: version + 1, newRunId: id });
          expect(made.entries).toBe(version);
          forks.push({ id, at: version + 1 });
        }
        const out = await running;
        expect(out.content).toBe("done");
        const source = (await readJournal(journal, "src")).map(plain);
        for (const { id, at } of forks) {
          const copied = (await readJournal(journal, id)).map(plain);
          expect(copied, `${id} is the source's prefix before seq ${at}`).toEqual(source.slice(0, at - 1));
        }
        // Every fork resumes to the end: the steps it holds completed are not run again in it.
        for (const { id } of forks) {
          const before = (await readJournal(journal, id)).filter(
            (e) => e.type === "frame.completed" && e.data.frameId.includes(":tool:"),
          ).length;
          const forked = await loop.run({ runId: id, journal });
          expect(forked.content).toBe("done");
          expect(forked.toolCallLog).toHaveLength(TURNS);
          expect((calls.get(id) ?? []).every((n) => n >= before)).toBe(true);
        }
        expect(calls.get("src")).toEqual([...Array(TURNS).keys()]);
      } finally {
        await journal.close();
      }
    }, 120_000);

    it("a prune while the run is running leaves it (refused where the store cannot prune), and the run completes", async () => {
      const journal = await backend.open();
      try {
        const calls = new Map<string, number[]>();
        const running = slowLoop(calls).run({ runId: "live", journal, input: "go" });
        await until("the run to start its turns", async () => (await journal.store.read("live")).length > 8, 30_000, 2);
        const far = Date.now() + 3_600_000; // every finished run is older than this
        for (let i = 0; i < 5; i++) {
          const pruned = await pruneRuns(journal, { completedBefore: far }).catch((e: unknown) => e);
          if (isPruneNotSupportedError(pruned)) continue; // SQLite: prune refuses every run, live ones too
          expect(pruned).toMatchObject({ runs: 0, entries: 0 });
          await new Promise((r) => setTimeout(r, 10));
        }
        const out = await running;
        expect(out.content).toBe("done");
        expect(calls.get("live")).toEqual([...Array(TURNS).keys()]);
      } finally {
        await journal.close();
      }
    }, 120_000);
  });
}

describe.skipIf(PG_URL === undefined)("prune of a finished run whose ownership is still held (PostgreSQL)", () => {
  it("is skipped while a holder has it, and removed once it lets go", async () => {
    const schema = freshSchema("prunelive");
    schemas.push(schema);
    const journal = openPostgresJournal(PG_URL as string, { schema });
    try {
      const calls = new Map<string, number[]>();
      const out = await slowLoop(calls).run({ runId: "done", journal, input: "go" });
      expect(out.content).toBe("done");
      const entries = (await readJournal(journal, "done")).length;
      // A holder that has not let go yet: the process that wrote run.completed and is still ending,
      // a cancelRun between its append and its release, a reader that took the run to resume it.
      const lease = await journal.store.acquire("done", { owner: "still-ending", leaseMs: 60_000 });
      const far = Date.now() + 3_600_000;
      expect(await pruneRuns(journal, { completedBefore: far, dryRun: true })).toMatchObject({ runs: 0, entries: 0 });
      expect(await pruneRuns(journal, { completedBefore: far })).toMatchObject({ runs: 0, entries: 0 });
      expect(await readJournal(journal, "done")).toHaveLength(entries);
      expect((await journal.store.holder?.("done"))?.owner).toBe("still-ending");
      await journal.store.release(lease);
      expect(await pruneRuns(journal, { completedBefore: far })).toMatchObject({ runs: 1, entries });
      expect(await readJournal(journal, "done")).toHaveLength(0);
    } finally {
      await journal.close();
    }
  }, 60_000);
});

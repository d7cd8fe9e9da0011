import { describe, expect, it } from "vitest";
import type { InspectionEvent } from "xstate";
import { replayRun } from "../../src/cli/replay.ts";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { rebuildToolCallLog } from "../../src/index.ts";
import { foldEntries, hydrateArchived } from "../../src/journal.ts";
import { tempDir } from "../events/tmp.ts";
import { chain, isLoop, loopActors, type Ref } from "../support/inspection.ts";
import { freePort, loom } from "./support.ts";

/**
 * `loom inspect` of a run whose calls ran sub-agents: each child run is replayed from its own
 * recording when the walk reaches its call, its chart shown under the parent's call actor, at any
 * depth, as the live run's inspector showed it; nothing is executed and no journal is written.
 */

describe("loom inspect's replay of a run with sub-agents", () => {
  it("replays each child run under its call, two levels deep, in the parent's one actor tree", async () => {
    const tmp = tempDir("loom-replay-subruns-");
    const journal = openSqliteJournal(tmp.file("chain.db"));
    try {
      await chain().run({ runId: "p", journal, input: "go" });
      const runIds = (await journal.store.listRuns()).map((r) => r.runId);
      const sizes = await Promise.all(runIds.map(async (id) => (await readJournal(journal, id)).length));

      const entries = await readJournal(journal, "p");
      const state = foldEntries(entries);
      await hydrateArchived(journal, state);
      const lean = await rebuildToolCallLog(journal, "p", "lean");
      const events: InspectionEvent[] = [];
      const result = await replayRun(journal, entries, state, lean, { inspect: (e) => events.push(e) });

      const child = "p/planner#turn:0:tool:1";
      const grandchild = `${child}/researcher#turn:0:tool:0`;
      expect(result).toEqual({
        ended: "completed",
        turns: 2,
        matching: 2,
        of: 2,
        subRuns: [
          {
            runId: child,
            ended: "completed",
            turns: 2,
            matching: 1,
            of: 1,
            subRuns: [{ runId: grandchild, ended: "completed", turns: 2, matching: 1, of: 1, subRuns: [] }],
          },
        ],
      });

      // One tree: the children's charts are actors under the parent's (its stand-in calls run in
      // its plainCalls actor, the closest actor to a call there is), every event rooted at its root.
      const root = events[0]?.actorRef as Ref;
      expect(new Set(events.map((e) => e.rootId))).toEqual(new Set([root.sessionId]));
      const [top, researcher, searcher] = loopActors(events);
      expect(loopActors(events)).toHaveLength(3);
      expect(top).toMatchObject({ id: root.id, parents: [] });
      expect(researcher).toMatchObject({ parents: ["plainCalls", root.id] });
      expect(searcher).toMatchObject({ parents: ["plainCalls", researcher?.id, "plainCalls", root.id] });
      // Each chart walks to completed, the children's before the parent's answer.
      const finals = events
        .filter((e) => e.type === "@xstate.snapshot" && isLoop(e.actorRef))
        .filter((e) => (e as { snapshot: { status?: string } }).snapshot.status === "done")
        .map((e) => (e.actorRef as Ref).id);
      expect(finals).toEqual([searcher?.id, researcher?.id, root.id]);

      // Only read: every journal of the chain is as it was.
      expect((await journal.store.listRuns()).map((r) => r.runId)).toEqual(runIds);
      expect(await Promise.all(runIds.map(async (id) => (await readJournal(journal, id)).length))).toEqual(sizes);
    } finally {
      await journal.close();
      tmp.remove();
    }
  });

  it("loom inspect lists each sub-agent run it replayed, indented under its parent, with its match count", async () => {
    const tmp = tempDir("loom-inspect-subruns-");
    const db = tmp.file("chain.db");
    const journal = openSqliteJournal(db);
    try {
      await chain().run({ runId: "p", journal, input: "go" });
    } finally {
      await journal.close();
    }
    try {
      const port = await freePort();
      const { code, stdout } = await loom(tmp.dir, [
        "inspect",
        "p",
        "--db",
        db,
        "--once",
        "--no-wait",
        "--port",
        String(port),
      ]);
      expect(code).toBe(0);
      const lines = stdout.split("\n");
      const at = lines.findIndex((l) => l.startsWith("replayed run p: 2 model responses, ended completed;"));
      expect(at).toBeGreaterThanOrEqual(0);
      expect(lines[at]).toMatch(/2\/2 tool results match the journal/);
      expect(lines.slice(at + 1, at + 3)).toEqual([
        "  sub-agent run p/planner#turn:0:tool:1: 2 model responses, ended completed; 1/1 tool results match",
        "    sub-agent run p/planner#turn:0:tool:1/researcher#turn:0:tool:0: 2 model responses, ended completed; 1/1 tool results match",
      ]);
    } finally {
      tmp.remove();
    }
  });
});

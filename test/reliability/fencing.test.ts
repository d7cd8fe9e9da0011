import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isOwnershipLostError, OwnershipLostError } from "../../src/core/errors.ts";
import { memoryArchive } from "../../src/events/archive.ts";
import { compact } from "../../src/events/compact.ts";
import { createJournal, type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";
import { crashingStore, frameProgress, logsOf } from "../support/loop.ts";

/**
 * Fencing (issue 14): no model or tool call unless this caller still owns the run when its
 * `frame.started` is appended, a re-run of a step whose outcome is unknown included, and a loop
 * whose append is refused stops there with `OwnershipLostError`. And a compaction that runs
 * beside a live run does not disturb it.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A loop of `turns` turns, one `work` call each, then an answer; counts every effect. */
function countedLoop(turns: number, work: (turn: number) => Promise<void> | void = () => {}) {
  const effects: string[] = [];
  const loop = agentLoop$({
    id: "f",
    model: scriptedModel(({ turn }) => {
      effects.push(`model:${turn}`);
      return turn < turns
        ? { toolCalls: [{ id: `c${turn}`, name: "work", input: { turn } }] }
        : { content: "finished", toolCalls: [] };
    }),
    tools: {
      work: {
        description: "works on a turn",
        execute: async (input, { stepId }) => {
          effects.push(stepId);
          await work((input as { turn: number }).turn);
          return { done: (input as { turn: number }).turn, text: "x".repeat(200) };
        },
      },
    },
    maxIterations: turns + 2,
  });
  return { loop, effects };
}

describe("fenced effects", () => {
  // k appends before the crash: 1 (run.started with the first model frame.started) leaves the model
  // frame of turn 0 open, 2 (the model's completion with the tool's frame.started) the tool frame.
  for (const [k, open] of [
    [1, "f#turn:0:model"],
    [2, "f#turn:0:tool:0"],
  ] as const) {
    it(`a stale owner resuming a run with ${open} in flight calls nothing and rejects with OwnershipLostError`, async () => {
      const store = memoryStore({ json: true });
      const crashed = countedLoop(2);
      await expect(
        crashed.loop.run({ runId: "r", input: "go", journal: createJournal({ store: crashingStore(store, k) }) }),
      ).rejects.toThrow(/simulated crash/);
      const journal = createJournal({ store });
      expect([...frameProgress(await readJournal(journal, "r")).open]).toEqual([open]);

      // A worker that stalled past its lease: another took the run over before it went on.
      const stale = await store.acquire("r", { owner: "stale worker", leaseMs: 1 });
      await sleep(5);
      const current = await store.acquire("r", { owner: "new owner", leaseMs: 60_000 });
      const before = await store.read("r");
      const late = countedLoop(2);
      const e = await late.loop.run({ runId: "r", journal, ownership: { lease: stale } }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(OwnershipLostError);
      expect(e).toMatchObject({
        code: "ownershipLost",
        runId: "r",
        token: stale.token,
        holder: { owner: "new owner", token: current.token },
      });
      expect(late.effects).toEqual([]); // not even the step whose outcome it could not know
      expect(await store.read("r")).toEqual(before);

      // The owner finishes it, running the open step once more (as a new, fenced attempt).
      const owner = countedLoop(2);
      const out = await owner.loop.run({ runId: "r", journal, ownership: { lease: current } });
      expect(out.content).toBe("finished");
      expect(owner.effects).toContain(open.endsWith("model") ? "model:0" : open);
    });
  }

  it("a live run whose lease is taken over mid-tool stops at its next append: nothing more is called", async () => {
    const store = memoryStore({ json: true });
    const journal = createJournal({ store });
    let takenBy: string | undefined;
    const { loop, effects } = countedLoop(3, async (turn) => {
      if (turn !== 1) return;
      // The process stalls past its 30 ms lease (no renewal runs), and another takes the run.
      const until = Date.now() + 80;
      while (Date.now() < until) {}
      takenBy = (await store.acquire("r", { owner: "successor", leaseMs: 60_000 })).owner;
    });
    const e = await loop.run({ runId: "r", input: "go", journal, ownership: { leaseMs: 30 } }).catch((x: unknown) => x);
    expect(takenBy).toBe("successor");
    expect(isOwnershipLostError(e)).toBe(true);
    expect(e).toMatchObject({ runId: "r", holder: { owner: "successor" } });
    // Turn 1's tool ran (it had started while owned); its result, and everything after, is refused.
    expect(effects).toEqual(["model:0", "f#turn:0:tool:0", "model:1", "f#turn:1:tool:0"]);
    const entries = await readJournal(journal, "r");
    expect(entries.at(-1)).toMatchObject({ type: "frame.started", data: { frameId: "f#turn:1:tool:0" } });
  });
});

describe("compaction beside a live run", () => {
  let tmp: ReturnType<typeof tempDir>;
  beforeAll(() => {
    tmp = tempDir("loom-fencing-");
  });
  afterAll(() => tmp.remove());

  const journals: [string, () => OpenJournal][] = [
    ["SQLite, archive in the same file", () => openSqliteJournal(tmp.file(`c-${Math.random()}.db`))],
    [
      "memory store, memory archive",
      () => createJournal({ store: memoryStore({ json: true }), archive: memoryArchive() }),
    ],
  ];
  for (const [name, open] of journals) {
    it(`compacting while a tool runs neither fails the run nor runs a tool again (${name})`, async () => {
      const reference = createJournal({ store: memoryStore({ json: true }) });
      await countedLoop(4).loop.run({ runId: "r", input: "go", journal: reference });

      const journal = open();
      let compacted: readonly string[] = [];
      const { loop, effects } = countedLoop(4, async (turn) => {
        if (turn === 3) compacted = (await compact(journal, "r", { keepTurns: 0 })).frameIds;
      });
      const out = await loop.run({ runId: "r", input: "go", journal });
      expect(out.content).toBe("finished");
      // Turn 3's frame was in flight: compaction moved the earlier turns' tool frames only.
      expect(compacted).toEqual(["f#turn:0:tool:0", "f#turn:1:tool:0", "f#turn:2:tool:0"]);
      expect(new Set(effects).size).toBe(effects.length); // every effect once
      expect(await logsOf(journal, "r")).toEqual(await logsOf(reference, "r"));
      // A resume serves everything from the (compacted) journal.
      const again = countedLoop(4);
      expect(await again.loop.run({ runId: "r", journal })).toEqual(out);
      expect(again.effects).toEqual([]);
      await journal.close();
    });
  }
});

import { describe, expect, it } from "vitest";
import type { NewEntry } from "../../src/events/types.ts";
import { appendBatcher, type BatchedAppend } from "../../src/postgres/appendBatch.ts";
import { tablesIn } from "../../src/postgres/schema.ts";

/**
 * The batching policy of appendBatch.ts without a database: what goes out when, and together with
 * what. (test/postgres/appendBatch.test.ts runs the statement itself on PostgreSQL.)
 */

const started: NewEntry = {
  type: "frame.started",
  data: { frameId: "l#turn:0:model", effect: "model", inputDigest: "0".repeat(64) },
};
const text = JSON.stringify(started.data);
const ask = (runId: string, written = false): BatchedAppend => ({
  runId,
  expectedVersion: 1,
  types: ["frame.started"],
  texts: [text],
  at: 0,
  fence: undefined,
  finishingFor: undefined,
  written,
});
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
/** A few turns of the event loop: what the batcher sends next has gone out by then. */
const turns = async () => {
  for (let i = 0; i < 5; i++) await tick();
};

/** A fake database: each statement waits until the test settles it; `alone` answers at once. */
function fake() {
  const statements: { runs: string[]; relaxed: boolean; settle: (error?: unknown) => void }[] = [];
  const alone: string[] = [];
  const batcher = appendBatcher(
    tablesIn(undefined),
    2,
    1,
    (statement) =>
      new Promise((resolve, reject) => {
        const runs = statement.values[0] as string[];
        statements.push({
          runs,
          relaxed: statement.text.includes("synchronous_commit"),
          settle: (error) =>
            error === undefined ? resolve({ rows: runs.map((run_id) => ({ run_id })) }) : reject(error),
        });
      }),
    async (a) => {
      alone.push(a.runId);
      return true;
    },
  );
  return { batcher, statements, alone };
}

describe("appendBatcher: when appends of many runs go out, and with what", () => {
  it("sends appends asked for together as one statement, and holds later ones while its statements are busy", async () => {
    const { batcher, statements, alone } = fake();
    const first = ["a", "b", "c"].map((id) => batcher.append(ask(id)));
    await turns();
    expect(statements.map((s) => s.runs)).toEqual([["a", "b", "c"]]);
    const later = ["d", "e"].map((id) => batcher.append(ask(id)));
    await turns();
    expect(statements.length).toBe(1); // the one statement allowed is in flight: d and e wait
    statements[0]!.settle();
    expect(await Promise.all(first)).toEqual([true, true, true]);
    await turns();
    expect(statements.map((s) => s.runs)).toEqual([
      ["a", "b", "c"],
      ["d", "e"],
    ]);
    statements[1]!.settle();
    expect(await Promise.all(later)).toEqual([true, true]);
    expect(alone).toEqual([]);
  });

  it("sends a lone append as the single-run statement, and a second append of a waiting run alone at once", async () => {
    const { batcher, statements, alone } = fake();
    expect(await batcher.append(ask("solo"))).toBe(true);
    expect(alone).toEqual(["solo"]);
    const x = batcher.append(ask("x"));
    const y = batcher.append(ask("y"));
    const again = batcher.append(ask("x"));
    expect(await again).toBe(true);
    expect(alone).toEqual(["solo", "x"]);
    await turns();
    expect(statements.map((s) => s.runs)).toEqual([["x", "y"]]);
    statements[0]!.settle();
    await Promise.all([x, y]);
  });

  it("keeps appends that need only be written apart, and serves the kind whose first append waited longest", async () => {
    const { batcher, statements } = fake();
    const busy = [batcher.append(ask("d0")), batcher.append(ask("d00"))];
    await turns();
    const waiting = [
      batcher.append(ask("w1", true)),
      batcher.append(ask("d1")),
      batcher.append(ask("w2", true)),
      batcher.append(ask("d2")),
    ];
    statements[0]!.settle();
    await Promise.all(busy);
    await turns();
    expect(statements.at(-1)).toMatchObject({ runs: ["w1", "w2"], relaxed: true });
    statements.at(-1)!.settle();
    await turns();
    expect(statements.at(-1)).toMatchObject({ runs: ["d1", "d2"], relaxed: false });
    statements.at(-1)!.settle();
    expect(await Promise.all(waiting)).toEqual([true, true, true, true]);
  });

  it("sends each append of a statement the server refused again alone; a lost connection reaches them all", async () => {
    const { batcher, statements, alone } = fake();
    const refused = ["a", "b"].map((id) => batcher.append(ask(id)));
    await turns();
    statements[0]!.settle(Object.assign(new Error("deadlock detected"), { code: "40P01" }));
    expect(await Promise.all(refused)).toEqual([true, true]);
    expect(alone.sort()).toEqual(["a", "b"]);
    const lost = ["c", "d"].map((id) => batcher.append(ask(id)));
    await turns();
    statements[1]!.settle(new Error("Connection terminated unexpectedly"));
    for (const p of lost) await expect(p).rejects.toThrow("Connection terminated");
    expect(alone).toEqual(["a", "b"]);
  });
});

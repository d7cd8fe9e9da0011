import { afterEach, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { parkedFor, waitingDueOf } from "../../src/postgres/parkedWaits.ts";
import { openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import { DAY, sleepLoop } from "./fixtures/waitWorker.ts";
import { dropSchema, freshSchema, PG_URL, sleep, until } from "./pg.ts";

/**
 * A parked durable wait that PostgreSQL's clock finds due and the worker's clock does not (a fake
 * clock, a host lagging the database) stays parked, nothing journaled, until the worker's clock
 * reaches it: on the worker's fast path (the claim reads the journal) and on the other (a store
 * Loom did not make, read with one query). The process-kill story is test/postgres/sleepKill.test.ts.
 */

const interrupted = (detail: unknown, reason = "waiting") =>
  ({ type: "run.interrupted", data: { reason, detail } }) as unknown as JournalEntry;

describe("waitingDueOf / parkedFor", () => {
  it("reads the first wake or timeout of a waiting interruption, and nothing else", () => {
    const at = (iso: string) => Date.parse(iso);
    const detail = {
      stepIds: ["a", "b"],
      expiresAt: { a: "2026-01-04T00:00:00.000Z", b: "2026-01-02T00:00:00.000Z" },
    };
    expect(waitingDueOf(interrupted(detail))).toBe(at("2026-01-02T00:00:00.000Z"));
    expect(waitingDueOf(interrupted({ stepIds: ["a"] }))).toBeUndefined(); // only a delivery ends it
    expect(waitingDueOf(interrupted(detail, "approval-pending"))).toBeUndefined();
    expect(waitingDueOf({ type: "frame.completed", data: {} } as unknown as JournalEntry)).toBeUndefined();
    expect(waitingDueOf(undefined)).toBeUndefined();
  });

  it("parks for the time left by the worker's clock, at most a poll; resumes once due", () => {
    expect(parkedFor(10_000, 9_990, 1000)).toBe(10);
    expect(parkedFor(10_000, 0, 1000)).toBe(1000);
    expect(parkedFor(10_000, 10_000, 1000)).toBeUndefined();
    expect(parkedFor(undefined, 0, 1000)).toBeUndefined();
  });
});

describe.skipIf(PG_URL === undefined)("a parked wait due by the database's clock only", () => {
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  for (const path of ["own store", "another store"] as const) {
    it(`stays parked until the worker's clock reaches it (${path})`, async () => {
      const schema = freshSchema("parkedwait");
      const journal = openPostgresJournal(PG_URL as string, { schema });
      cleanups.push(
        () => dropSchema(schema),
        () => journal.close(),
      );
      const T0 = Math.floor((Date.now() - 30 * DAY) / 1000) * 1000; // behind the database's clock
      let clock = T0;
      const loop = sleepLoop(
        () => clock,
        () => {},
      );
      const workerJournal = path === "own store" ? journal : { ...journal, store: Object.create(journal.store) };
      const errors: unknown[] = [];
      const worker = startWorker({
        journal: workerJournal,
        loops: { rem: loop },
        clock: () => clock,
        pollMs: 20,
        onError: (e) => errors.push(e),
      });
      cleanups.push(() => worker.stop({ abort: true }));
      await submitRun(journal, { runId: "nap", loop, input: "remind me" });
      const types = async () => (await readJournal(journal, "nap")).map((e) => e.type);
      await until("the run to wait", async () => (await types()).at(-1) === "run.interrupted");
      clock = T0 + 3 * DAY - 1;
      await sleep(400); // some twenty claims of the parked run
      expect((await types()).filter((t) => t === "run.interrupted")).toHaveLength(1);
      clock = T0 + 3 * DAY;
      await until("the run to complete", async () => (await types()).at(-1) === "run.completed");
      expect((await types()).filter((t) => t === "run.interrupted")).toHaveLength(1);
      expect(errors).toEqual([]);
    });
  }
});

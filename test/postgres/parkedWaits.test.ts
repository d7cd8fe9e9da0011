import { afterEach, describe, expect, it } from "vitest";
import { readJournal } from "../../src/events/journal.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { parkedFor, waitingDueOf } from "../../src/postgres/parkedWaits.ts";
import { openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import { approvalLoop } from "../runtime/workers/approvalLoop.ts";
import { DAY, sleepLoop } from "./fixtures/waitWorker.ts";
import { dropSchema, freshSchema, PG_URL, sleep, sql, until } from "./pg.ts";

/**
 * A parked durable wait that PostgreSQL's clock finds due and the worker's clock does not (a fake
 * clock, a host lagging the database) stays parked, nothing journaled, until the worker's clock
 * reaches it: on the worker's fast path (the claim reads the journal) and on the other (a store
 * Loom did not make, read with one query); the same for an approval that expires, unless something
 * woke the run (a sub-agent's approval). The process-kill story is test/postgres/sleepKill.test.ts.
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
    expect(waitingDueOf(interrupted(detail, "approval-pending"))).toBe(at("2026-01-02T00:00:00.000Z")); // approvals that expire
    expect(waitingDueOf(interrupted(detail, "max-iterations"))).toBeUndefined();
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

    it(`an approval that expires stays parked until the worker's clock reaches the expiry (${path})`, async () => {
      const schema = freshSchema("parkedapproval");
      const journal = openPostgresJournal(PG_URL as string, { schema });
      cleanups.push(
        () => dropSchema(schema),
        () => journal.close(),
      );
      const T0 = Math.floor((Date.now() - 30 * DAY) / 1000) * 1000;
      let clock = T0;
      const { loop, ran } = approvalLoop({ approvalTimeoutMs: DAY });
      const workerJournal = path === "own store" ? journal : { ...journal, store: Object.create(journal.store) };
      const worker = startWorker({ journal: workerJournal, loops: { shop: loop }, clock: () => clock, pollMs: 20 });
      cleanups.push(() => worker.stop({ abort: true }));
      await submitRun(journal, { runId: "refund", loop, input: "refund o-1" });
      const types = async () => (await readJournal(journal, "refund")).map((e) => e.type);
      const interruptions = async () => (await types()).filter((t) => t === "run.interrupted").length;
      await until("the approval to be pending", async () => (await types()).at(-1) === "run.interrupted");
      await sleep(400);
      expect(await interruptions()).toBe(1);

      // Something woke the run (as a sub-agent's approval does): it is resumed though not due, and waits again.
      await sql(`UPDATE "${schema}".loom_leases SET woken = true, expires_at = now() WHERE run_id = 'refund'`);
      await until("the woken run to be resumed", async () => (await interruptions()) === 2);
      await sleep(200);
      expect(await interruptions()).toBe(2);

      clock = T0 + DAY; // the approval expires: the run declines the call and goes on
      await until("the run to complete", async () => (await types()).at(-1) === "run.completed");
      const entries = await readJournal(journal, "refund");
      expect(entries.find((e) => e.type === "call.settled")?.data).toMatchObject({ reason: "approval-expired" });
      expect(await interruptions()).toBe(2);
      expect(ran).toEqual([]);
    });
  }
});

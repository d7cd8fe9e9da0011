import { createServer, connect as dial, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, readJournal } from "../../src/events/journal.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { isWorkerDatabaseError, openPostgresJournal, startWorker, submitRun } from "../../src/postgres.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { dropSchema, freshSchema, PG_URL, sleep, until } from "./pg.ts";

/**
 * A TCP proxy to the test server on a port of its own, which the test can cut (every connection
 * dropped, new ones refused) and restore: an outage without touching the server. It counts the
 * connections open at once, to see the pool's bound.
 */
function outageProxy(target: URL) {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  let open = 0;
  let mostOpen = 0;
  const up = () =>
    new Promise<void>((resolve) => {
      if (server !== undefined) return resolve(); // already up
      server = createServer((client) => {
        const upstream = dial(Number(target.port || 5432), target.hostname);
        open++;
        mostOpen = Math.max(mostOpen, open);
        let closed = false;
        const drop = () => {
          if (!closed) open--;
          closed = true;
          client.destroy();
          upstream.destroy();
        };
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on("error", drop);
          s.on("close", () => {
            sockets.delete(s);
            drop();
          });
        }
        client.pipe(upstream);
        upstream.pipe(client);
      });
      server.listen(port, "127.0.0.1", () => {
        port = (server!.address() as { port: number }).port;
        resolve();
      });
    });
  return {
    up,
    async cut() {
      const s = server;
      server = undefined;
      for (const socket of sockets) socket.destroy();
      if (s) await new Promise((resolve) => s.close(resolve));
    },
    url: () => Object.assign(new URL(target.href), { port: String(port) }).href,
    mostOpen: () => mostOpen,
  };
}

// Skipped without LOOM_PG_URL (store.test.ts prints the one line saying so).
describe.skipIf(PG_URL === undefined)("a worker through a database outage", () => {
  const target = new URL(PG_URL ?? "postgres://127.0.0.1:5432/unused"); // read only when the suite runs
  const schema = freshSchema("outage");
  const proxy = outageProxy(target);
  let journal: OpenJournal; // the submitter's, straight to the server
  const completed = (runId: string) => async () => (await readJournal(journal, runId)).at(-1)?.type === "run.completed";
  const loop = agentLoop$({
    id: "o",
    model: scriptedModel(({ turn }) =>
      turn === 0 ? { toolCalls: [{ id: "c", name: "work", input: {} }] } : { content: "ok", toolCalls: [] },
    ),
    tools: { work: { description: "works", execute: () => sleep(20).then(() => ({ done: true })) } },
  });

  beforeAll(async () => {
    journal = openPostgresJournal(target.href, { schema });
    await journal.store.listRuns();
    await proxy.up();
    await proxy.cut(); // the port is known and closed: the worker starts during an outage
  });
  afterAll(async () => {
    await proxy.cut();
    await journal.close();
    await dropSchema(schema);
  });

  it("reports a few lines, not thousands, recovers, and keeps to its pool's bound", async () => {
    const lines: string[] = [];
    const workerJournal = openPostgresJournal(proxy.url(), { schema, pool: { max: 3 } });
    const worker = startWorker({
      journal: workerJournal,
      loops: { o: loop },
      pollMs: 10, // the flood the review saw came from a fast poll meeting a dead database
      concurrency: 8,
      errorIntervalMs: 2000,
      onError: (e, runId) => {
        expect(isWorkerDatabaseError(e), String(e)).toBe(true);
        lines.push(`${runId}: ${String(e)}`);
      },
    });
    try {
      // Down from the start: 3 s of failed claims and reconnections.
      await sleep(3000);
      const whileDown = lines.length;
      expect(whileDown).toBeGreaterThanOrEqual(1);
      expect(whileDown).toBeLessThanOrEqual(3); // one at once, then one per 2 s (the old worker: ~300)

      await proxy.up();
      await submitRun(journal, { runId: "after-start", loop, input: "x" });
      await until("the run submitted once the database is back", completed("after-start"));

      // 20 runs for 8 slots on 3 connections: statements queue for the pool, and the pool holds.
      const runIds = Array.from({ length: 20 }, (_, i) => `busy-${i}`);
      for (const runId of runIds) await submitRun(journal, { runId, loop, input: "x" });
      await until("the 20 runs", async () => (await Promise.all(runIds.map((r) => completed(r)()))).every(Boolean));
      expect(proxy.mostOpen()).toBeLessThanOrEqual(3 + 1); // the pool, and the listening connection

      // Down again mid-life, for 3 s, after 2 s up (a new outage: its first error is reported at once).
      await sleep(2000);
      const before = lines.length;
      await proxy.cut();
      await sleep(3000);
      expect(lines.length - before).toBeGreaterThanOrEqual(1);
      expect(lines.length - before).toBeLessThanOrEqual(3);
      await proxy.up();
      await submitRun(journal, { runId: "after-outage", loop, input: "x" });
      await until("the run submitted after the outage", completed("after-outage"));
    } finally {
      await worker.stop();
      await workerJournal.close();
    }
  }, 60_000);

  it("runs in flight when every connection drops finish afterwards, no frame journaled twice", async () => {
    const started = new Set<string>(); // run/step of every tool execution
    const slow = agentLoop$({
      id: "slow",
      model: scriptedModel(({ turn, messages }) => {
        const first = messages.find((m) => m.role === "user");
        const run = first?.role === "user" ? first.content : "?"; // the input is the run id
        return turn < 2
          ? { toolCalls: [{ id: `c${turn}`, name: "work", input: { run } }] }
          : { content: "ok", toolCalls: [] };
      }),
      tools: {
        work: {
          description: "works for 300 ms",
          execute: async (input, { stepId }) => {
            started.add(`${(input as { run: string }).run}/${stepId}`);
            await sleep(300);
            return { done: stepId };
          },
        },
      },
    });
    await proxy.up();
    const workerJournal = openPostgresJournal(proxy.url(), { schema, pool: { max: 4 } });
    let failedAttempts = 0; // attempts the outage cut off (retried later)
    const worker = startWorker({
      journal: workerJournal,
      loops: { slow },
      leaseMs: 1500, // a run whose release failed in the outage is taken up again soon after
      concurrency: 6,
      onError: (_e, runId) => {
        if (runId !== undefined) failedAttempts++;
      },
    });
    const runIds = Array.from({ length: 6 }, (_, i) => `inflight-${i}`);
    try {
      for (const runId of runIds) await submitRun(journal, { runId, loop: slow, input: runId });
      await until("every run inside its first tool", async () => started.size >= 6);
      await proxy.cut(); // as a server restart does: every connection gone, none accepted
      await sleep(1000);
      await proxy.up();
      await until(
        "every run to complete",
        async () => (await Promise.all(runIds.map((r) => completed(r)()))).every(Boolean),
        30_000,
      );
    } finally {
      await worker.stop();
      await workerJournal.close();
    }
    for (const runId of runIds) {
      const frames = (await readJournal(journal, runId)).flatMap((e) =>
        e.type === "frame.completed" ? [e.data.frameId] : [],
      );
      expect(new Set(frames).size, runId).toBe(frames.length); // each frame completed once
      expect(frames.length, runId).toBe(5); // 3 model calls, 2 tool calls
    }
    expect(failedAttempts).toBeGreaterThanOrEqual(1); // the outage did cut runs off mid-way
  }, 60_000);
});

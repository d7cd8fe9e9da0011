import { describe, expect, it } from "vitest";
import { memoryStore } from "../../src/events/memory.ts";
import type { EventStore } from "../../src/events/store.ts";
import type { NewEntry } from "../../src/events/types.ts";
import { runStateProjection } from "../../src/projections/runState.ts";
import { AppendAfterCloseError, Appender } from "../../src/runtime/base/appender.ts";

const started = (frameId: string): NewEntry => ({
  type: "frame.started",
  data: { frameId, effect: "tool:t", inputDigest: "d" },
});
const completed = (frameId: string): NewEntry => ({ type: "frame.completed", data: { frameId, output: frameId } });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A memory store that records each append's entry types, takes 10 ms over each, and refuses the appends `refuse` names. */
function watched(refuse = new Set<number>()) {
  const inner = memoryStore({ json: true });
  const batches: string[][] = [];
  const store: EventStore = {
    ...inner,
    async append(runId, entries, options) {
      batches.push(entries.map((e) => `${e.type}:${(e.data as { frameId?: string }).frameId ?? ""}`));
      await sleep(10);
      if (refuse.has(batches.length)) throw new Error(`refused append ${batches.length}`);
      return inner.append(runId, entries, options);
    },
  };
  return { inner, store, batches };
}

async function opened(store: EventStore) {
  const appender = new Appender(store, "r", runStateProjection.initial());
  await appender.append({ type: "run.started", data: { loopId: "l", input: "go", tools: ["t"] } });
  return appender;
}

describe("Appender: group commit and deferred results", () => {
  it("appends queued together or while one is written go out as one, each caller resolved once its entries are durable", async () => {
    const { store, batches, inner } = watched();
    const appender = await opened(store);
    const order: string[] = [];
    const track = (p: Promise<void>, id: string) => p.then(() => order.push(id));
    // Dispatched together (a response's calls): one append.
    await Promise.all(["a", "b", "c"].map((id) => track(appender.append(started(id)), id)));
    // Queued while one is being written: the next append.
    const d = track(appender.append(started("d")), "d");
    await sleep(3);
    const e = track(appender.append(started("e")), "e");
    const f = track(appender.append(started("f")), "f");
    await Promise.all([d, e, f]);
    expect(batches.slice(1)).toEqual([
      ["frame.started:a", "frame.started:b", "frame.started:c"],
      ["frame.started:d"],
      ["frame.started:e", "frame.started:f"],
    ]);
    expect(order).toEqual(["a", "b", "c", "d", "e", "f"]);
    expect((await inner.read("r")).map((x) => x.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(appender.state.version).toBe(7);
    expect(appender.appends).toBe(4);
  });

  it("a deferred result is folded at once and written with the next append, before the entries it carries", async () => {
    const { store, batches, inner } = watched();
    const appender = await opened(store);
    await appender.append(started("a"));
    appender.defer(completed("a"));
    expect(appender.state.frames.a?.status).toBe("completed"); // readable now
    expect(appender.state.version).toBe(2); // but not durable yet
    expect(await inner.read("r", { from: 3 })).toEqual([]);
    await appender.append(started("b"));
    expect(batches.at(-1)).toEqual(["frame.completed:a", "frame.started:b"]);
    expect(appender.state.version).toBe(4);
    appender.defer(completed("b"));
    await appender.flush();
    expect((await inner.read("r")).map((e) => e.type).at(-1)).toBe("frame.completed");
  });

  it("a refused combined append rejects every caller in it; deferred results wait for the next one", async () => {
    const { store, batches, inner } = watched(new Set([4]));
    const appender = await opened(store);
    await appender.append(started("a"));
    const x = appender.append(started("x")); // being written while the next ones queue
    await sleep(3);
    appender.defer(completed("a"));
    const b = appender.append(started("b"));
    const c = appender.append(started("c"));
    const [rx, rb, rc] = await Promise.allSettled([x, b, c]);
    expect([rx.status, rb.status, rc.status]).toEqual(["fulfilled", "rejected", "rejected"]);
    expect(batches[3]).toEqual(["frame.completed:a", "frame.started:b", "frame.started:c"]);
    expect(appender.state.frames.b).toBeUndefined(); // a refused append folds nothing
    await appender.appendFinal({ type: "run.interrupted", data: { reason: "aborted", detail: null } });
    expect((await inner.read("r", { from: 4 })).map((e) => e.type)).toEqual(["frame.completed", "run.interrupted"]);
  });

  it("once closed, a result is neither deferred nor appended; the final entry still carries earlier ones", async () => {
    const { store, inner } = watched();
    const appender = await opened(store);
    await appender.append(started("a"));
    appender.defer(completed("a"));
    appender.close("aborted");
    expect(() => appender.defer(completed("a"))).toThrow(AppendAfterCloseError);
    await expect(appender.append(started("b"))).rejects.toBeInstanceOf(AppendAfterCloseError);
    await appender.appendFinal({ type: "run.interrupted", data: { reason: "aborted", detail: null } });
    expect((await inner.read("r", { from: 3 })).map((e) => e.type)).toEqual(["frame.completed", "run.interrupted"]);
  });
  it("writes a step nothing can join (a model call's frame.started) at once; a tool call's waits a turn for its siblings", async () => {
    const inner = memoryStore({ json: true });
    const batches: number[] = [];
    const store: EventStore = {
      ...inner,
      append: (runId, entries, options) => {
        batches.push(entries.length);
        return inner.append(runId, entries, options);
      },
    };
    const appender = await opened(store);
    const model = appender.append({
      type: "frame.started",
      data: { frameId: "l#turn:0:model", effect: "model", inputDigest: "d" },
    });
    expect(batches).toHaveLength(2); // handed to the store before append() returned
    await model;
    const tool = appender.append(started("l#turn:0:tool:0"));
    expect(batches).toHaveLength(2); // waits for the other calls of the response
    await tool;
    expect(batches).toHaveLength(3);
  });

  it("still lets the event loop run every few ms when every append is one nothing can join", async () => {
    const appender = await opened(memoryStore({ json: true }));
    let firedAt = -1;
    let turn = 0;
    setTimeout(() => {
      firedAt = turn;
    }, 0);
    for (; turn < 40; turn++) {
      const until = performance.now() + 1;
      while (performance.now() < until) {} // a turn's work, 1 ms
      const frameId = `l#turn:${turn}:model`;
      await appender.append({ type: "frame.started", data: { frameId, effect: "model", inputDigest: "d" } });
      appender.defer(completed(frameId));
    }
    expect(firedAt).toBeGreaterThanOrEqual(0);
    expect(firedAt).toBeLessThan(20); // a timer waits ~10 ms, not for the whole run
  });
});

import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, openSqliteJournal, readJournal, rebuildToolCallLog } from "../../src/index.ts";
import { foldEntries, projectToolCallLog, type RunState } from "../../src/journal.ts";
import { runViewOf } from "../../src/read/runView.ts";
import type { ViewerActions } from "../../src/viewer/actions.ts";
import { html } from "../../src/viewer/html.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { buildTravel, EVERY, extendTravel, logsAt, stateAt, viewAt } from "../../src/viewer/travel.ts";
import { freePort, loom, tempDir } from "../cli/support.ts";
import { viewerJournal } from "./support.ts";

const dir = tempDir("loom-viewer-");
let db: string;
let journal: OpenJournal;
beforeAll(async () => {
  db = await viewerJournal(dir);
  journal = openSqliteJournal(db, { readonly: true });
});
afterAll(() => journal?.close());

const get = async (viewer: Viewer, path: string) => {
  const res = await fetch(viewer.url + path);
  return { status: res.status, text: await res.text() };
};

/** A raw request (fetch will not send another Host or an Origin). */
const raw = (
  viewer: Viewer,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string },
) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(viewer.url + path, { method: options.method ?? "GET", headers: options.headers }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    req.end(options.body);
  });

describe("time travel", () => {
  it("has at every entry the run's own fold there: the state a resume trusts, and the view derived from it", async () => {
    const entries = await readJournal(journal, "sink-1");
    const travel = buildTravel("sink-1", entries);
    expect(travel.kept).toHaveLength(Math.floor(entries.length / EVERY) + 1);
    for (let i = 0; i <= entries.length; i++) {
      const folded = foldEntries(entries.slice(0, i));
      expect(stateAt(travel, i)).toEqual(folded);
      expect(viewAt(travel, i)).toEqual(runViewOf(folded));
    }
    expect(viewAt(travel, entries.length).chart).toBe("completed");
  });

  it("copies only what an entry changes: untouched frames are the same objects, all frozen", async () => {
    const entries = await readJournal(journal, "sink-1");
    const travel = buildTravel("sink-1", entries, 4);
    const i = entries.findIndex((e) => e.type === "frame.completed" && e.data.frameId === "sink#turn:3:tool:0");
    const before = stateAt(travel, i);
    const after = stateAt(travel, i + 1);
    expect(after).not.toBe(before);
    // Every frame the entries since the state kept before it do not touch is that state's own object.
    const k = Math.floor((i + 1) / travel.every);
    const kept = travel.kept[k] as RunState;
    const touched = new Set(
      entries.slice(k * travel.every, i + 1).flatMap((e) => ("frameId" in e.data ? [e.data.frameId as string] : [])),
    );
    const untouched = Object.keys(kept.frames).filter((id) => !touched.has(id));
    expect(untouched.length).toBeGreaterThan(4);
    for (const id of untouched) expect(after.frames[id]).toBe(kept.frames[id]);
    expect(after.frames["sink#turn:3:tool:0"]).not.toBe(before.frames["sink#turn:3:tool:0"]);
    expect(after.frames["sink#turn:3:tool:0"]?.status).toBe("completed");
    expect(before.frames["sink#turn:3:tool:0"]?.status).toBe("started");
    expect(after.frames["sink#turn:3:model"]).toBe(before.frames["sink#turn:3:model"]);
    expect(Object.isFrozen(after)).toBe(true);
    expect(Object.isFrozen(after.frames["sink#turn:3:tool:0"])).toBe(true);
    // The states kept are shared by a travel extended with more entries, never rebuilt.
    const half = buildTravel("sink-1", entries.slice(0, 10), 4);
    const whole = extendTravel(half, entries.slice(10));
    expect(whole.kept[2]).toBe(half.kept[2]);
    expect(stateAt(whole, entries.length)).toEqual(stateAt(travel, entries.length));
  });

  it("rebuilds both logs at any point as the fold and projectToolCallLog do, and the whole run's as rebuildToolCallLog", async () => {
    const entries = await readJournal(journal, "sink-1");
    const travel = buildTravel("sink-1", entries);
    const counts = new Set<number>();
    for (const i of [0, 7, 15, 22, 30]) {
      const { full, lean } = await logsAt(journal, travel, i);
      const folded = foldEntries(entries.slice(0, i));
      expect(lean).toEqual(projectToolCallLog(folded, "lean"));
      expect(full).toHaveLength(lean.length);
      counts.add(lean.length);
    }
    expect(counts.size).toBeGreaterThan(2); // the log grows along the run
    const end = await logsAt(journal, travel, entries.length);
    expect(end.full).toEqual(await rebuildToolCallLog(journal, "sink-1", "full"));
    expect(end.lean).toEqual(await rebuildToolCallLog(journal, "sink-1", "lean"));
  });

  it("names the statechart state of each point: calling the model, backing off, dispatching", async () => {
    const flaky = buildTravel("flaky-1", await readJournal(journal, "flaky-1"));
    const charts = flaky.entries.map((_, i) => viewAt(flaky, i + 1).chart);
    expect(charts).toContain("running.callingModel");
    expect(charts).toContain("running.backingOff");
    const sinkTravel = buildTravel("sink-1", await readJournal(journal, "sink-1"));
    const sink = sinkTravel.entries.map((_, i) => viewAt(sinkTravel, i + 1).chart);
    expect(sink).toContain("running.dispatching");
    expect(sink).toContain("finishing");
    expect(runViewOf(foldEntries(await readJournal(journal, "wait-1"))).chart).toBe("interrupted");
  });
});

describe("the viewer's pages", () => {
  let viewer: Viewer;
  beforeAll(async () => {
    viewer = await startViewer({ journal, source: db });
  });
  afterAll(() => viewer?.stop());

  it("lists the runs, the one waiting for an approval first, filtered by status", async () => {
    const all = await get(viewer, "/");
    expect(all.status).toBe(200);
    const order = [...all.text.matchAll(/data-run="([^"]+)"/g)].map((m) => m[1]);
    expect(order[0]).toBe("wait-1");
    expect(order).toHaveLength(3);
    expect(all.text).toContain("300 in · 21 out"); // the tokens wait-1's model reported
    const done = await get(viewer, "/?status=completed");
    expect([...done.text.matchAll(/data-run="([^"]+)"/g)].map((m) => m[1]).sort()).toEqual(["flaky-1", "sink-1"]);
  });

  it("shows a run's timeline: calls with status and bytes, retries, settled calls, the pending approval", async () => {
    const sink = await get(viewer, "/runs/sink-1");
    expect(sink.text).toContain('data-step="sink#turn:0:tool:1"');
    expect(sink.text).toContain("settled: unknown-tool");
    expect(sink.text).toContain("declined");
    const flaky = await get(viewer, "/runs/flaky-1");
    expect(flaky.text).toContain("2 failed attempts");
    const wait = await get(viewer, "/runs/wait-1");
    expect(wait.text).toContain("Waiting for approval");
    expect(wait.text).toContain("support#turn:1:tool:0");
    expect(wait.text).not.toContain("<button"); // no actions given: no buttons
    expect(wait.text).toContain('data-live="1"');
    expect((await get(viewer, "/runs/nope")).status).toBe(404);
  });

  it("shows a step as loom show does: digest and what verified it", async () => {
    const step = "sink#turn:0:tool:0";
    const page = await get(viewer, `/runs/sink-1/steps/${encodeURIComponent(step)}`);
    const shown = JSON.parse((await loom(dir, ["show", step, "--run", "sink-1", "--db", db, "--json"])).stdout);
    expect(page.text).toContain(shown.digest);
    for (const v of shown.verified) expect(page.text).toContain(html`${v}`.text);
    expect((await get(viewer, "/runs/sink-1/steps/nope")).status).toBe(404);
  });

  it("serves the time-travel page and each point's part, the state marked on the chart", async () => {
    const page = await get(viewer, "/runs/sink-1/travel?at=5");
    expect(page.text).toContain('<svg xmlns="http://www.w3.org/2000/svg" class="chart"');
    const at5 = viewAt(buildTravel("sink-1", await readJournal(journal, "sink-1")), 5).chart;
    expect(at5).toMatch(/^running\./);
    expect(page.text).toContain(`class="state atomic current" data-state="${at5}"`);
    expect(page.text).toContain('class="state compound active" data-state="running"');
    const part = await get(viewer, "/runs/flaky-1/travel/at/3");
    expect(part.text).toMatch(/data-chart="running\.(backingOff|callingModel)"/);
  });

  it("shows the turn of each point as the state kept for that point has it", async () => {
    const entries = await readJournal(journal, "sink-1");
    const started = entries.findIndex((e) => e.type === "frame.started" && e.data.frameId === "sink#turn:3:tool:0");
    const completed = entries.findIndex((e) => e.type === "frame.completed" && e.data.frameId === "sink#turn:3:tool:0");
    const status = (text: string) => /data-step="sink#turn:3:tool:0">[\s\S]*?class="status (\w+)"/.exec(text)?.[1];
    expect(status((await get(viewer, `/runs/sink-1/travel/at/${started + 1}`)).text)).toBe("running");
    expect(status((await get(viewer, `/runs/sink-1/travel/at/${completed + 1}`)).text)).toBe("ok");
  });

  it("answers only requests addressed to it, and takes no form from another site", async () => {
    expect((await raw(viewer, "/", { headers: { host: "evil.example:80" } })).status).toBe(421);
    expect((await raw(viewer, "/runs/%E0%A4%A", {})).status).toBe(400);
    const post = await raw(viewer, "/runs/wait-1/actions", {
      method: "POST",
      headers: { origin: "http://evil.example", "content-type": "application/x-www-form-urlencoded" },
      body: "action=cancel&confirmed=yes",
    });
    expect(post.status).toBe(403);
    // No Origin and no form token: refused as a foreign form (test/viewer/formToken.test.ts).
    expect((await raw(viewer, "/runs/wait-1/actions", { method: "POST", body: "action=cancel" })).status).toBe(403);
    const own = { origin: viewer.url };
    const readOnly = await raw(viewer, "/runs/wait-1/actions", { method: "POST", headers: own, body: "action=cancel" });
    expect(readOnly.status).toBe(405); // this viewer was started without actions
  });

  it("escapes what comes from the journal", () => {
    expect(html`<td>${"<script>alert(1)</script>"}</td>`.text).toBe("<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>");
  });
});

describe("actions", () => {
  /** Records the calls (the pending approvals are the journal's: `listPendingApprovals`). */
  function recordingActions() {
    const calls: unknown[][] = [];
    const actions: ViewerActions = {
      recordApproval: async (...args) => calls.push(["recordApproval", ...args.slice(1)]),
      cancelRun: async (...args) => calls.push(["cancelRun", ...args.slice(1)]),
      forkRun: async (...args) => calls.push(["forkRun", ...args.slice(1)]),
    };
    return { actions, calls };
  }

  it("shows approve/deny, cancel and fork, asks before acting, then calls the run-control API", async () => {
    const { actions, calls } = recordingActions();
    const viewer = await startViewer({ journal, actions });
    try {
      const page = await get(viewer, "/runs/wait-1");
      expect(page.text).toContain('value="approve"');
      expect(page.text).toContain("Cancel run");
      expect(page.text).toContain("Fork");
      const form = "action=approve&stepId=support%23turn%3A1%3Atool%3A0";
      const headers = { "content-type": "application/x-www-form-urlencoded", origin: viewer.url };
      const ask = await raw(viewer, "/runs/wait-1/actions", { method: "POST", headers, body: form });
      expect(ask.status).toBe(200);
      expect(ask.text).toContain("Approve call support#turn:1:tool:0 of run wait-1?");
      expect(calls).toEqual([]);
      const done = await raw(viewer, "/runs/wait-1/actions", {
        method: "POST",
        headers,
        body: `${form}&confirmed=yes`,
      });
      expect(done.status).toBe(303);
      const fork = "action=fork&at=support%23turn%3A0%3Amodel&newRunId=wait-2&confirmed=yes";
      await raw(viewer, "/runs/wait-1/actions", { method: "POST", headers, body: fork });
      const bad = await raw(viewer, "/runs/wait-1/actions", {
        method: "POST",
        headers,
        body: "action=fork&confirmed=yes",
      });
      expect(bad.status).toBe(400);
      expect(calls).toEqual([
        ["recordApproval", "wait-1", "support#turn:1:tool:0", { approved: true, by: "loom view" }],
        ["forkRun", "wait-1", { at: "support#turn:0:model", newRunId: "wait-2" }],
      ]);
    } finally {
      await viewer.stop();
    }
  });
});

describe("loom view", () => {
  it("serves the journal until Ctrl-C", async () => {
    const stop = new AbortController();
    const port = await freePort();
    const running = loom(dir, ["view", "--db", db, "--port", String(port)], { signal: stop.signal });
    let res: Response | undefined;
    for (let i = 0; i < 100 && !res; i++) {
      res = await fetch(`http://127.0.0.1:${port}/`).catch(() => undefined);
      if (!res) await new Promise((r) => setTimeout(r, 50));
    }
    expect(await res?.text()).toContain("wait-1");
    stop.abort();
    const { code, stdout } = await running;
    expect(code).toBe(0);
    expect(stdout).toContain(`http://127.0.0.1:${port}`);
  });
});

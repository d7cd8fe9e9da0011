import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  agentLoop$,
  cancelRun,
  type OpenJournal,
  openSqliteJournal,
  readJournal,
  scriptedModel,
  type Tool,
} from "../../src/index.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { loom, tempDir } from "../cli/support.ts";
import { loops as waitLoops } from "../runtime/workers/waitLoops.ts";
import { waitingRun } from "../viewer/support.ts";

/**
 * `loom show <runId>` and the viewer's run page tell one timeline (src/read/timeline.ts): the same
 * recording, read by both, says the same of the run and of each step. Runs: one cancelled while
 * its tool ran, one interrupted with a call waiting for approval, one that failed (`run.failed`),
 * one sleeping and one waiting for an event (durable waits: docs/waits.md).
 */

const dir = tempDir("loom-read-timeline-");
const db = join(dir, "t.db");
let viewer: Viewer;
let reader: OpenJournal;

/** `stop-1`: cancelled while its tool ran (no outcome recorded for the call). */
async function cancelledInFlight(journal: OpenJournal): Promise<void> {
  let started: () => void = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const wait: Tool = {
    description: "waits until aborted",
    execute: (_input, { signal }) =>
      new Promise((_, reject) => {
        started();
        signal.addEventListener("abort", () => reject(signal.reason));
      }),
  };
  const loop = agentLoop$({
    id: "slow",
    model: scriptedModel([
      { content: "looking", toolCalls: [{ id: "c0", name: "wait", input: {} }] },
      { content: "done", toolCalls: [] },
    ]),
    tools: { wait },
  });
  const run = loop.run({ runId: "stop-1", journal, input: "go", ownership: { leaseMs: 300 } }).catch(() => {});
  await running;
  await cancelRun(journal, "stop-1", { reason: "operator stop", waitMs: 5_000 });
  await run;
}

beforeAll(async () => {
  const journal = openSqliteJournal(db);
  try {
    await cancelledInFlight(journal);
    await waitingRun(journal, "wait-1");
    await waitLoops[0]?.run({ runId: "pay-1", journal, input: "pay" }).catch(() => {});
    await waitLoops[1]?.run({ runId: "nap-1", journal, input: "nap" }).catch(() => {});
    // A run that failed: `run.failed` after its first turn (what the chart writes for a failure).
    await waitingRun(journal, "fail-1");
    const version = (await readJournal(journal, "fail-1")).at(-1)?.seq ?? 0;
    await journal.store.append(
      "fail-1",
      [{ type: "run.failed", data: { error: { name: "ToolCrash", message: "the refund service is gone" } } }],
      { expectedVersion: version },
    );
  } finally {
    await journal.close();
  }
  reader = openSqliteJournal(db, { readonly: true });
  viewer = await startViewer({ journal: reader });
});
afterAll(async () => {
  await viewer?.stop();
  await reader?.close();
});

/** What the run page says of each step (`data-step` / `data-turn` rows) and how the timeline ends. */
async function pageSays(runId: string) {
  const page = await (await fetch(`${viewer.url}/runs/${encodeURIComponent(runId)}`)).text();
  const label = (row: string) => /<span class="status ([^"]+)">([^<]+)<\/span>/.exec(row);
  const steps = new Map<string, { status: string; words: string }>();
  for (const m of page.matchAll(/<tr class="(model|call)" data-(turn|step)="([^"]+)">([\s\S]*?)<\/tr>/g)) {
    const key = m[2] === "turn" ? `turn ${m[3]}` : (m[3] as string);
    const s = label(m[4] as string);
    if (s) steps.set(key, { status: s[1] as string, words: s[2] as string });
  }
  const run = /<h1>Run <code>[^<]*<\/code> <span class="status ([^"]+)">([^<]+)<\/span>/.exec(page);
  const end = /<tr class="end ([a-z]+)"><td colspan="7">([^<]*)<\/td><\/tr>/.exec(page);
  return { run: run?.[2], steps, end: end ? { type: end[1], text: end[2] } : undefined };
}

async function showSays(runId: string) {
  const json = await loom(dir, ["show", runId, "--db", db, "--json"]);
  expect(json.code, json.stderr).toBe(0);
  const text = await loom(dir, ["show", runId, "--db", db]);
  const parsed = JSON.parse(json.stdout) as {
    activity: string;
    story: {
      turns: { turn: number; status: string; tools: { stepId: string; status: string }[] }[];
      ended?: { type: string };
    };
  };
  return { parsed, text: text.stdout };
}

const decode = (s: string) =>
  s
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");

describe("loom show and the viewer tell one timeline", () => {
  for (const [runId, expected] of [
    ["stop-1", { run: "cancelled", end: "cancelled: operator stop", call: "started" }],
    ["wait-1", { run: "waiting for approval", end: "interrupted: approval-pending", call: "waiting-for-approval" }],
    ["fail-1", { run: "failed", end: "failed: ToolCrash: the refund service is gone", call: "not-run" }],
    ["nap-1", { run: "waiting (until 20", end: "interrupted: waiting", call: "waiting" }],
    ["pay-1", { run: "waiting for event", end: "interrupted: waiting", call: "waiting" }],
  ] as const) {
    it(`${runId}: the same run status, step statuses and ending`, async () => {
      const page = await pageSays(runId);
      const { parsed, text } = await showSays(runId);
      // The run: the same words on the page and in the story (a sleep's status ends with its wake time).
      expect(page.run?.startsWith(expected.run), page.run).toBe(true);
      expect(text).toContain(`status  ${page.run}`);
      // Every step: the page's status is the story's, in the same words.
      let steps = 0;
      for (const turn of parsed.story.turns) {
        expect(page.steps.get(`turn ${turn.turn}`)?.status).toBe(turn.status);
        for (const tool of turn.tools) {
          const row = page.steps.get(tool.stepId);
          expect(row?.status, tool.stepId).toBe(tool.status);
          expect(text).toContain(`${tool.stepId}: ${row?.words}`);
          steps++;
        }
      }
      expect(steps).toBeGreaterThan(0);
      // The last call of the run stands as expected (cut off, waiting, never run).
      expect(parsed.story.turns.at(-1)?.tools.at(-1)?.status).toBe(expected.call);
      // The ending.
      expect(page.end?.type).toBe(parsed.story.ended?.type);
      expect(decode(page.end?.text ?? "")).toBe(expected.end);
      expect(text).toContain(`stopped ${expected.end}`);
    });
  }
});

describe("a run's durable waits, from the one timeline", () => {
  for (const [runId, stepId, kind] of [
    ["nap-1", "napper#turn:0:tool:0", "sleep"],
    ["pay-1", "payer#turn:0:tool:0", "event"],
  ] as const) {
    it(`${runId}: loom show's story and the viewer's Waiting section list the same ${kind} wait`, async () => {
      const json = await loom(dir, ["show", runId, "--db", db, "--json"]);
      const waits = (
        JSON.parse(json.stdout) as { story: { waits: { stepId: string; kind: string; deliver: string }[] } }
      ).story.waits;
      expect(waits.map((w) => [w.stepId, w.kind])).toEqual([[stepId, kind]]);
      const text = (await loom(dir, ["show", runId, "--db", db])).stdout;
      expect(text).toContain(
        `waiting ${stepId} (${kind === "sleep" ? "nap" : "pay"}) for ${kind === "sleep" ? "a time" : "an event"}`,
      );
      const page = await (await fetch(`${viewer.url}/runs/${encodeURIComponent(runId)}`)).text();
      const section = /<section class="waits">([\s\S]*?)<\/section>/.exec(page)?.[1] ?? "";
      expect([...section.matchAll(/data-step="([^"]+)"/g)].map((m) => m[1])).toEqual([stepId]);
      expect(decode(section)).toContain(waits[0]?.deliver);
    });
  }

  it("a run with no wait has none in its story or on its page", async () => {
    const json = await loom(dir, ["show", "wait-1", "--db", db, "--json"]);
    expect((JSON.parse(json.stdout) as { story: { waits: unknown[] } }).story.waits).toEqual([]);
    const page = await (await fetch(`${viewer.url}/runs/wait-1`)).text();
    expect(page).not.toContain('<section class="waits">');
  });
});

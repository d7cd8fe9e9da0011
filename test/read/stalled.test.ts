import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentLoop$, type OpenJournal, openSqliteJournal, scriptedModel } from "../../src/index.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { loom, tempDir } from "../cli/support.ts";
import { startWorker, type Worker } from "../support/processes.ts";

/**
 * A run whose process was SIGKILLed is `stalled`: nobody runs it. `loom show` and the viewer's run
 * page must not say that its model call is `calling` or its tool `running`: they read `started`,
 * their outcome never recorded. Runs: one killed while its second model call ran, two while their
 * tool ran (one of them resumed afterwards: its tool ran twice, and both say so).
 */

const dir = tempDir("loom-read-stalled-");
const db = join(dir, "s.db");
const workers: Worker[] = [];
let viewer: Viewer;
let reader: OpenJournal;

/** Runs `fixture` until it prints `line`, then SIGKILLs it. */
async function killedAt(fixture: string, runId: string, line: string): Promise<void> {
  const worker = startWorker(fixture, [db, runId]);
  workers.push(worker);
  await worker.waitFor((l) => l === line, line);
  worker.child.kill("SIGKILL");
  await worker.exited;
}

beforeAll(async () => {
  await Promise.all([
    killedAt("test/fixtures/stuckModel.ts", "think-1", "model calling"),
    killedAt("test/fixtures/stuckTool.ts", "charge-1", "tool running"),
    killedAt("test/fixtures/stuckTool.ts", "charge-2", "tool running"),
  ]);
  reader = openSqliteJournal(db, { readonly: true });
  viewer = await startViewer({ journal: reader });
}, 60_000);
afterAll(async () => {
  for (const w of workers) w.child.kill("SIGKILL");
  await viewer?.stop();
  await reader?.close();
});

/** The status word of each timeline row of the run page (`turn <n>` for a model call, the step id for a call). */
async function pageStatuses(runId: string): Promise<Map<string, string>> {
  const page = await (await fetch(`${viewer.url}/runs/${encodeURIComponent(runId)}`)).text();
  const out = new Map<string, string>();
  for (const m of page.matchAll(/<tr class="(model|call)" data-(turn|step)="([^"]+)">([\s\S]*?)<\/tr>/g)) {
    const status = /<span class="status ([^"]+)">/.exec(m[4] as string)?.[1];
    if (status) out.set(m[2] === "turn" ? `turn ${m[3]}` : (m[3] as string), status);
  }
  return out;
}

describe("a stalled run's timeline", () => {
  it("says its model call started, not calling, in loom show and on the run page", async () => {
    const text = (await loom(dir, ["show", "think-1", "--db", db])).stdout;
    expect(text).toMatch(/^status {2}stalled/m);
    expect(text).toMatch(/^turn 1 {2}model started/m);
    expect(text).not.toContain("calling");
    const json = JSON.parse((await loom(dir, ["show", "think-1", "--db", db, "--json"])).stdout);
    expect(json.story.turns.map((t: { status: string }) => t.status)).toEqual(["completed", "started"]);
    expect((await pageStatuses("think-1")).get("turn 1")).toBe("started");
  });

  it("says its tool call started, not running, in loom show and on the run page", async () => {
    const text = (await loom(dir, ["show", "charge-1", "--db", db])).stdout;
    expect(text).toMatch(/^status {2}stalled/m);
    expect(text).toContain("tool charge stuck#turn:0:tool:0: started");
    expect(text).not.toMatch(/running/);
    expect((await pageStatuses("charge-1")).get("stuck#turn:0:tool:0")).toBe("started");
  });
});

describe("a tool that ran again after its run was cut off", () => {
  it("is marked as run again in loom show and on the run page, a tool that ran once is not", async () => {
    // The loop test/fixtures/stuckTool.ts runs, its tool answering this time.
    const loop = agentLoop$({
      id: "stuck",
      model: scriptedModel([
        { content: "charging", toolCalls: [{ id: "c1", name: "charge", input: { euros: 12 } }] },
        { content: "charged", toolCalls: [] },
      ]),
      tools: { charge: { description: "charges a card", execute: () => ({ charged: 12 }) } },
    });
    const journal = openSqliteJournal(db);
    try {
      await loop.run({ runId: "charge-2", journal });
      await loop.run({ runId: "once-1", journal, input: "charge 12 euros" });
    } finally {
      await journal.close();
    }
    const text = (await loom(dir, ["show", "charge-2", "--db", db])).stdout;
    expect(text).toMatch(
      /tool charge stuck#turn:0:tool:0: ok, .*ran again after being cut off \(no outcome recorded\)/,
    );
    const json = JSON.parse((await loom(dir, ["show", "charge-2", "--db", db, "--json"])).stdout);
    expect(json.story.turns[0].tools[0]).toMatchObject({ status: "ok", reruns: 1 });
    const page = await (await fetch(`${viewer.url}/runs/charge-2`)).text();
    expect(page).toMatch(
      /<tr class="call" data-step="stuck#turn:0:tool:0">[\s\S]*?<span class="rerun"[^>]*>rerun<\/span>/,
    );

    const once = (await loom(dir, ["show", "once-1", "--db", db])).stdout;
    expect(once).toContain("tool charge stuck#turn:0:tool:0: ok");
    expect(once).not.toContain("ran again");
    expect(await (await fetch(`${viewer.url}/runs/once-1`)).text()).not.toContain('class="rerun"');
  });
});

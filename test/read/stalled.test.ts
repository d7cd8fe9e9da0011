import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, openSqliteJournal } from "../../src/index.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { loom, tempDir } from "../cli/support.ts";
import { startWorker, type Worker } from "../support/processes.ts";

/**
 * A run whose process was SIGKILLed is `stalled`: nobody runs it. `loom show` and the viewer's run
 * page must not say that its model call is `calling` or its tool `running`: they read `started`,
 * their outcome never recorded. Runs: one killed while its second model call ran, one while its
 * tool ran.
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
  await killedAt("test/fixtures/stuckModel.ts", "think-1", "model calling");
  await killedAt("test/fixtures/stuckTool.ts", "charge-1", "tool running");
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

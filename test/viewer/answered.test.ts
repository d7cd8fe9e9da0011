import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, openSqliteJournal, recordApproval } from "../../src/index.ts";
import { cancelRun, forkRun } from "../../src/runtime/control/operations.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";
import { viewerJournal } from "./support.ts";

const dir = tempDir("loom-viewer-answered-");
let journal: OpenJournal;
let viewer: Viewer;
beforeAll(async () => {
  journal = openSqliteJournal(await viewerJournal(dir));
  viewer = await startViewer({ journal, actions: { recordApproval, cancelRun, forkRun } });
});
afterAll(async () => {
  await viewer?.stop();
  await journal?.close();
});

const get = async (path: string) => (await fetch(viewer.url + path)).text();
const post = (path: string, body: string) =>
  fetch(viewer.url + path, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: viewer.url },
    body,
    redirect: "manual",
  });

describe("the viewer after an approval given from it", () => {
  it("stops saying the run waits for approval: its page and the run list say it was answered and how to resume it", async () => {
    expect(await get("/")).toContain("waiting for approval");
    const form = "action=approve&stepId=support%23turn%3A1%3Atool%3A0&confirmed=yes";
    const done = await post("/runs/wait-1/actions", form);
    expect(done.status).toBe(303);

    const list = await get("/");
    expect(list).not.toContain("waiting for approval");
    const row = /<tr class="[^"]*" data-run="wait-1">[\s\S]*?<\/tr>/.exec(list)?.[0] ?? "";
    expect(row).toContain('<span class="status answered">answered</span>');
    expect(row).toContain("approvals answered; resume with loop.run({ runId: &quot;wait-1&quot;, journal })");

    const page = await get("/runs/wait-1");
    expect(page).not.toContain("Waiting for approval");
    expect(page).not.toContain("awaiting-approval");
    expect(page).toContain('<span class="status answered">answered</span>');
    expect(page).toMatch(/data-step="support#turn:1:tool:0">[\s\S]*?class="status asked"[\s\S]*?approved/);
  });
});

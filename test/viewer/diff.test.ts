import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentLoop$, type OpenJournal, openSqliteJournal, scriptedModel } from "../../src/index.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";

const dir = tempDir("loom-viewer-diff-");
let journal: OpenJournal;
let viewer: Viewer;

const shop = (query: string) =>
  agentLoop$({
    id: "shop",
    model: scriptedModel([
      { toolCalls: [{ id: "c1", name: "search", input: { q: query, limit: 5 } }] },
      { content: "done" },
    ]),
    tools: { search: { description: "search", execute: async () => ({ hits: 1 }) } },
  });

beforeAll(async () => {
  journal = openSqliteJournal(`${dir}/viewer.db`);
  await shop("shoes").run({ runId: "a", journal, input: "find" });
  await shop("<b>boots</b>").run({ runId: "b", journal, input: "find" });
  viewer = await startViewer({ journal });
});
afterAll(async () => {
  await viewer?.stop();
  await journal?.close();
});

const get = async (path: string) => {
  const res = await fetch(viewer.url + path);
  return { status: res.status, text: await res.text() };
};

describe("the viewer's diff page", () => {
  it("shows two runs side by side, the changed input's patch escaped, and the first divergence", async () => {
    const { status, text } = await get("/diff?a=a&b=b");
    expect(status).toBe(200);
    expect(text).toContain('<tr class="change input-changed" data-change="input-changed">');
    expect(text).toContain("replace /q &quot;&lt;b&gt;boots&lt;/b&gt;&quot;");
    expect(text).not.toContain("<b>boots</b>");
    expect(text).toContain("First divergence: turn 0");
    expect(text).toContain('href="/runs/a"');
  });

  it("says identical for a run beside itself, and names a missing run or parameter", async () => {
    expect((await get("/diff?a=a&b=a")).text).toContain('<span class="status ok">identical</span>');
    const missing = await get("/diff?a=a&b=nope");
    expect(missing.status).toBe(404);
    expect(missing.text).toContain("no run nope in this journal");
    expect((await get("/diff?a=a")).status).toBe(400);
  });
});

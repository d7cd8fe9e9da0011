import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ModelResponse } from "../../src/events/types.ts";
import { agentLoop$, agentTool, openSqliteJournal, scriptedModel, type Tool } from "../../src/index.ts";
import { startViewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";

const dir = tempDir("loom-viewer-subruns-");
const ask = (name: string, input: unknown): ModelResponse => ({ toolCalls: [{ id: `${name}-1`, name, input }] });
const CHILD = "trip/planner#turn:0:tool:0";

describe("loom view: a sub-agent's run under its parent's call", () => {
  it("links the call to its sub-agent run, and answers a pending approval on the child's run", async () => {
    const db = join(dir, "trip.db");
    const book: Tool = { description: "books", requiresApproval: true, execute: () => "booked" };
    const booker = agentLoop$({
      id: "booker",
      model: scriptedModel([ask("book", { day: "May 3" }), { content: "booked", toolCalls: [] }]),
      tools: { book },
    });
    const planner = agentLoop$({
      id: "planner",
      model: scriptedModel([ask("booking", { prompt: "book" }), { content: "planned", toolCalls: [] }]),
      tools: { booking: agentTool(booker, { description: "books" }) },
    });
    const journal = openSqliteJournal(db);
    try {
      await planner.run({ runId: "trip", journal, input: "plan" }).catch(() => undefined);
      const viewer = await startViewer({
        journal,
        actions: {
          recordApproval: async (_j, runId, stepId) => ({
            runId,
            stepId,
            toolName: "book",
            approved: true,
            inputDigest: null,
          }),
          cancelRun: async () => ({ status: "cancelled" }),
          forkRun: async () => ({ runId: "x", forkedFrom: { runId: "trip", seq: 2 }, entries: 1 }),
        },
      });
      try {
        const page = await (await fetch(`${viewer.url}/runs/trip`)).text();
        const child = `/runs/${encodeURIComponent(CHILD)}`;
        expect(page).toContain(`<a class="subrun" href="${child}">sub-agent run ↘</a>`);
        expect(page).toContain(`in sub-agent run <a href="${child}">`);
        expect(page).toContain(`<form method="post" action="${child}/actions" class="buttons">`);
        expect((await fetch(viewer.url + child)).status).toBe(200);
      } finally {
        await viewer.stop();
      }
    } finally {
      await journal.close();
    }
  });

  it("lists each sub-agent's run under its parent's on the runs page, and names the parent when a filter hides it", async () => {
    const db = join(dir, "tree.db");
    const book: Tool = { description: "books", requiresApproval: true, execute: () => "booked" };
    const booker = agentLoop$({
      id: "booker",
      model: scriptedModel([ask("book", { day: "May 3" }), { content: "booked", toolCalls: [] }]),
      tools: { book },
    });
    const researcher = agentLoop$({ id: "researcher", model: scriptedModel([{ content: "mild", toolCalls: [] }]) });
    const scout = agentLoop$({
      id: "scout",
      model: scriptedModel([ask("booking", { prompt: "book" }), { content: "done", toolCalls: [] }]),
      tools: { booking: agentTool(booker, { description: "books" }) },
    });
    const planner = agentLoop$({
      id: "planner",
      model: scriptedModel([
        {
          toolCalls: [
            { id: "a", name: "research", input: { prompt: "weather" } },
            { id: "b", name: "scouting", input: { prompt: "book" } },
          ],
        },
        { content: "planned", toolCalls: [] },
      ]),
      tools: {
        research: agentTool(researcher, { description: "researches" }),
        scouting: agentTool(scout, { description: "scouts and books" }),
      },
    });
    const solo = agentLoop$({ id: "solo", model: scriptedModel([{ content: "hi", toolCalls: [] }]) });
    const researched = `${CHILD}`;
    const scouted = "trip/planner#turn:0:tool:1";
    const booked = `${scouted}/scout#turn:0:tool:0`;
    const journal = openSqliteJournal(db);
    try {
      await solo.run({ runId: "z-solo", journal, input: "hi" });
      await planner.run({ runId: "trip", journal, input: "plan" }).catch(() => undefined);
      const viewer = await startViewer({ journal });
      try {
        const all = await (await fetch(`${viewer.url}/`)).text();
        const rows = [...all.matchAll(/<tr class="[^"]*" data-run="([^"]+)"(?: data-parent="([^"]+)")?>/g)].map((m) => [
          m[1],
          m[2],
        ]);
        // The waiting tree first (its waiting sub-runs before the finished one), each child under its parent.
        expect(rows).toEqual([
          ["trip", undefined],
          [scouted, "trip"],
          [booked, scouted],
          [researched, "trip"],
          ["z-solo", undefined],
        ]);
        expect(all).toContain(
          `<td class="subrun depth-2" title="sub-agent run of ${scouted}, its call scout#turn:0:tool:0">`,
        );
        expect(all).not.toContain("sub-agent of");
        // Filtered to completed runs: the researcher's run is shown without its parent, so it names it.
        const done = await (await fetch(`${viewer.url}/?status=completed`)).text();
        expect([...done.matchAll(/data-run="([^"]+)"/g)].map((m) => m[1])).toEqual([researched, "z-solo"]);
        expect(done).toContain('<span class="dim">sub-agent of <a href="/runs/trip">trip</a></span>');
      } finally {
        await viewer.stop();
      }
    } finally {
      await journal.close();
    }
  });
});

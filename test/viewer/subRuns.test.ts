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
});

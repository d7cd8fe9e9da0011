import { describe, expect, it } from "vitest";
import { agentLoop$, cancelRun, openSqliteJournal, readJournal, scriptedModel, type Tool } from "../../src/index.ts";
import { foldEntries } from "../../src/journal.ts";
import { runViewOf } from "../../src/read/runView.ts";
import { startViewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";

/** A run cancelled while its tool ran: the journal's last entry is `run.cancelled` after a started call. */
async function cancelledInFlight(file: string): Promise<void> {
  const journal = openSqliteJournal(file);
  try {
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
        { toolCalls: [{ id: "c1", name: "wait", input: {} }] },
        { content: "done", toolCalls: [] },
      ]),
      tools: { wait },
    });
    const run = loop.run({ runId: "stop-1", journal, input: "go", ownership: { leaseMs: 300 } }).catch(() => {});
    await running;
    await cancelRun(journal, "stop-1", { reason: "operator stop", waitMs: 5_000 });
    await run;
  } finally {
    await journal.close();
  }
}

describe("a cancelled run", () => {
  it("is folded as cancelled, not as running", async () => {
    const file = `${tempDir("loom-viewer-cancelled-")}/c.db`;
    await cancelledInFlight(file);
    const journal = openSqliteJournal(file, { readonly: true });
    try {
      const entries = await readJournal(journal, "stop-1");
      expect(entries.at(-1)?.type).toBe("run.cancelled");
      const view = runViewOf(foldEntries(entries));
      expect(view.status).toBe("cancelled");
      expect(view.chart).toBe("cancelled");
      expect(view.cancelled).toEqual({ reason: "operator stop" });
    } finally {
      await journal.close();
    }
  });

  it("has a run page that says cancelled and why, and is not live", async () => {
    const file = `${tempDir("loom-viewer-cancelled-page-")}/c.db`;
    await cancelledInFlight(file);
    const journal = openSqliteJournal(file, { readonly: true });
    const viewer = await startViewer({ journal });
    try {
      const text = await (await fetch(`${viewer.url}/runs/stop-1`)).text();
      expect(text).toContain('data-live=""');
      expect(text).not.toContain("● live");
      expect(text).toContain("<dt>statechart</dt><dd><code>cancelled</code></dd>");
      expect(text).toMatch(/<tr class="end cancelled"><td colspan="7">cancelled: operator stop<\/td><\/tr>/);
    } finally {
      await viewer.stop();
      await journal.close();
    }
  });
});

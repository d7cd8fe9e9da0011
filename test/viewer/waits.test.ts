import { describe, expect, it } from "vitest";
import { openSqliteJournal } from "../../src/index.ts";
import { startViewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";
import { loops } from "../runtime/workers/waitLoops.ts";

describe("the viewer's run page of a waiting run", () => {
  it("lists each wait: what, until when, and how it ends", async () => {
    const file = `${tempDir("loom-viewer-waits-")}/w.db`;
    const writer = openSqliteJournal(file);
    await loops[0]?.run({ runId: "pay-1", journal: writer, input: "pay" }).catch(() => {});
    await loops[1]?.run({ runId: "nap-1", journal: writer, input: "nap" }).catch(() => {});
    await writer.close();
    const journal = openSqliteJournal(file, { readonly: true });
    const viewer = await startViewer({ journal });
    try {
      const nap = await (await fetch(`${viewer.url}/runs/nap-1`)).text();
      expect(nap).toContain("<h2>Waiting</h2>");
      // The status says what the run waits for (src/read statusLabel), on its page and in the list.
      expect(nap).toMatch(/<span class="status interrupted">waiting \(until \d{4}-\d\d-\d\dT[\d:.]+Z\)<\/span>/);
      const list = await (await fetch(`${viewer.url}/`)).text();
      expect(list).toContain('<span class="status interrupted">waiting for event</span>');
      expect(list).toMatch(/<span class="status interrupted">waiting \(until /);
      expect(nap).toMatch(/<strong>nap<\/strong> <code>napper#turn:0:tool:0<\/code> · a time · a nap · until /);
      expect(nap).toContain("wakes at ");
      const pay = await (await fetch(`${viewer.url}/runs/pay-1`)).text();
      expect(pay).toMatch(/· an event · payment/);
      expect(pay).toContain("loom deliver &lt;token&gt;");
    } finally {
      await viewer.stop();
      await journal.close();
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, openSqliteJournal, recordApproval } from "../../src/index.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";
import { approvalLoop, REFUND_STEP } from "../runtime/workers/approvalLoop.ts";

const dir = tempDir("loom-viewer-edited-");
let journal: OpenJournal;
let viewer: Viewer;

beforeAll(async () => {
  journal = openSqliteJournal(`${dir}/viewer.db`);
  const { loop } = approvalLoop({ approvalTimeoutMs: 3_600_000 });
  await loop.run({ runId: "order-1", journal, input: "refund" }).catch(() => {});
  await recordApproval(journal, "order-1", REFUND_STEP, {
    approved: true,
    by: "<ana>",
    input: { orderId: "o-1", cents: 250 },
    scope: "run",
  });
  await loop.run({ runId: "order-1", journal });
  viewer = await startViewer({ journal });
});
afterAll(async () => {
  await viewer?.stop();
  await journal?.close();
});

describe("the run page and an approval given with an edited input", () => {
  it("says who approved, with which input, and for how long, escaped", async () => {
    const text = await (await fetch(`${viewer.url}/runs/order-1`)).text();
    expect(text).toContain(
      "approved by &lt;ana&gt; with an edited input {&quot;orderId&quot;:&quot;o-1&quot;,&quot;cents&quot;:250} for the rest of the run",
    );
  });
});

import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OpenJournal, openSqliteJournal, readJournal } from "../../src/index.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";
import { supportLoop, viewerJournal } from "./support.ts";

/** A run page's live feed: server-sent events of the run's RunEvents (followRun) after a cursor. */

const dir = tempDir("loom-viewer-live-");
let db: string;
let journal: OpenJournal;
beforeAll(async () => {
  db = await viewerJournal(dir);
  journal = openSqliteJournal(db, { readonly: true });
});
afterAll(() => journal?.close());

/** A raw request, with the headers an EventSource sends. */
const raw = (viewer: Viewer, path: string, headers: Record<string, string>) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(viewer.url + path, { headers }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    req.end();
  });

describe("live", () => {
  it("streams the run's new entries as server-sent events, each with its seq as id", async () => {
    const file = await viewerJournal(tempDir("loom-viewer-live-writer-"));
    const writer = openSqliteJournal(file);
    const viewer = await startViewer({ journal: writer });
    try {
      const before = (await readJournal(writer, "wait-1")).at(-1)?.seq ?? 0;
      const res = await fetch(`${viewer.url}/runs/wait-1/live?after=${before}`);
      expect(res.headers.get("content-type")).toContain("text/event-stream");
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      // The run goes on: the approval answered, the loop resumed, in this process.
      const loop = supportLoop();
      await loop.run({ runId: "wait-1", journal: writer, approvals: { "support#turn:1:tool:0": true } });
      let text = "";
      while (!text.includes("event: end")) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
      expect(ids[0]).toBe(before + 1);
      expect(text).toContain('"type":"run-completed"'); // RunEvents, from followRun
      expect(text).toContain("event: end");
    } finally {
      await viewer.stop();
      await writer.close();
    }
  });
});

describe("live, reconnecting", () => {
  it("resumes after the Last-Event-ID an EventSource sends back, and ends with the run", async () => {
    const viewer = await startViewer({ journal });
    try {
      const last = (await readJournal(journal, "sink-1")).at(-1)?.seq ?? 0;
      const { text } = await raw(viewer, "/runs/sink-1/live?after=0", { "last-event-id": String(last - 3) });
      expect([...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual([last - 2, last - 1, last]);
      expect(text).toContain("event: end");
    } finally {
      await viewer.stop();
    }
  });
});

describe("live, ids", () => {
  it("names only an entry's last event: an approval-requested has no id, the run-interrupted of its entry has it", async () => {
    const viewer = await startViewer({ journal });
    try {
      const { text } = await raw(viewer, "/runs/wait-1/live?after=0", {});
      const blocks = text.split("\n\n").filter((b) => b.includes("data: {"));
      const asked = blocks.find((b) => b.includes('"type":"approval-requested"'));
      const interrupted = blocks.find((b) => b.includes('"type":"run-interrupted"'));
      expect(asked).toBeDefined();
      expect(asked).not.toMatch(/^id: /m); // a reconnect after it would skip the run-interrupted
      const cursor = Number(/"cursor":(\d+)/.exec(asked as string)?.[1]);
      expect(interrupted).toMatch(new RegExp(`^id: ${cursor}$`, "m"));
    } finally {
      await viewer.stop();
    }
  });
});

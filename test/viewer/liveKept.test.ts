import { describe, expect, it } from "vitest";
import { type Journal, openSqliteJournal, readJournal } from "../../src/index.ts";
import type { EventStore } from "../../src/journal.ts";
import { followSource } from "../../src/viewer/live.ts";
import { startViewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";
import { supportLoop, waitingRun } from "./support.ts";

/**
 * The live run page keeps the run it shows: each entry `followRun` says was appended is read
 * once and folded into the kept view, and the part it sends is what a fresh render says.
 */

/** A store that counts the reads of `runId`: every read, those from its first entry, and the entries read. */
function counting(store: EventStore, runId: string) {
  const count = { reads: 0, fromStart: 0, entries: 0 };
  const counted: EventStore = Object.create(store);
  counted.read = async (id, options) => {
    const entries = await store.read(id, options);
    if (id === runId) {
      count.reads++;
      if ((options?.from ?? 1) <= 1) count.fromStart++;
      count.entries += entries.length;
    }
    return entries;
  };
  return { counted, count };
}

describe("the live run page", () => {
  it("sends #run as a fresh render has it after N appends, reading each appended entry once and the journal never again", async () => {
    const file = `${tempDir("loom-viewer-kept-")}/kept.db`;
    const writer = openSqliteJournal(file);
    await waitingRun(writer, "wait-1");
    const { counted, count } = counting(writer.store, "wait-1");
    const journal: Journal = { store: counted, blobs: writer.blobs, archive: writer.archive };
    // The events come from followRun on the journal itself: only the page's own reads are counted.
    const viewer = await startViewer({ journal, live: followSource(writer) });
    try {
      const page = await (await fetch(`${viewer.url}/runs/wait-1`)).text();
      const seq = Number(/data-seq="(\d+)"/.exec(page)?.[1]);
      const res = await fetch(`${viewer.url}/runs/wait-1/live?after=${seq}`);
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const atStart = { ...count };
      // The run goes on in this process: N entries appended.
      await supportLoop().run({ runId: "wait-1", journal: writer, approvals: { "support#turn:1:tool:0": true } });
      let text = "";
      while (!text.includes("event: end")) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      const appended = (await readJournal(writer, "wait-1")).filter((e) => e.seq > seq).length;
      expect(appended).toBeGreaterThan(3);
      const parts = [...text.matchAll(/^event: run\ndata: (.*)$/gm)].map(
        (m) => JSON.parse(m[1] as string) as { seq: number; live: boolean; html: string },
      );
      expect(parts.length).toBeGreaterThan(0);
      const last = parts.at(-1);
      expect(last?.seq).toBe(seq + appended);
      expect(last?.live).toBe(false);
      // Not the journal re-read per append: no read from the first entry, each appended entry read once at most.
      expect(count.fromStart - atStart.fromStart).toBe(0);
      expect(count.entries - atStart.entries).toBeLessThanOrEqual(appended);
      expect(count.reads - atStart.reads).toBeLessThanOrEqual(parts.length);
      const fresh = await (await fetch(`${viewer.url}/runs/wait-1?part=run`)).text();
      expect(last?.html).toBe(fresh);
      expect(fresh).toContain("completed after 3 model calls");
    } finally {
      await viewer.stop();
      await writer.close();
    }
  });
});

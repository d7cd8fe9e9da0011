import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  agentLoop$,
  createJournal,
  memoryStore,
  type OpenJournal,
  readJournal,
  rebuildToolCallLog,
  scriptedModel,
} from "../../src/index.ts";
import { type JournalEntry, memoryBlobStore } from "../../src/journal.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";

/**
 * Time travel shows, at each point, every call completed by then: its full output in the full
 * log (a claim-checked one read back from the blob store) and its digest in the lean log, as
 * text on the page (issue 30). The outputs here are long (their distinctive value at the end)
 * and more than forty, so neither a clipped line nor a window of the last calls would show them.
 */

const TURNS = 45;
const needle = (turn: number) => `needle-${turn}-end`;
let journal: OpenJournal;
let viewer: Viewer;
let entries: JournalEntry[];

beforeAll(async () => {
  const blobs = memoryBlobStore();
  journal = createJournal({ store: memoryStore({ json: true }), blobs });
  const responses = Array.from({ length: TURNS }, (_, turn) => ({
    content: `turn ${turn}`,
    toolCalls: [{ id: `c${turn}`, name: "fetch", input: { turn } }],
  }));
  const loop = agentLoop$({
    id: "t",
    model: scriptedModel([...responses, { content: "done", toolCalls: [] }]),
    tools: {
      fetch: {
        description: "a long page; turn 0's is claim-checked",
        execute: (input) => {
          const { turn } = input as { turn: number };
          return { turn, body: `${"x".repeat(turn === 0 ? 6_000 : 1_800)} ${needle(turn)}` };
        },
      },
    },
    claimCheck: { blobs, thresholdBytes: 5_000 },
    maxIterations: TURNS + 1,
  });
  await loop.run({ runId: "long-1", journal, input: "go" });
  entries = await readJournal(journal, "long-1");
  viewer = await startViewer({ journal });
});
afterAll(async () => {
  await viewer?.stop();
  await journal?.close();
});

/** The page's text as a user reads and searches it: tags removed, entities decoded. */
const textOf = (html: string) =>
  html
    .replace(/<[^>]*>/g, " ")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");

const pageAt = async (index: number) =>
  textOf(await (await fetch(`${viewer.url}/runs/long-1/travel?at=${index}`)).text());

/** The point just after the entry that completed turn `turn`'s tool frame (the entries before it: `index - 1`). */
const completedAt = (turn: number) =>
  entries.findIndex((e) => e.type === "frame.completed" && e.data.frameId === `t#turn:${turn}:tool:0`) + 1;

describe("time travel shows the outputs of the calls completed by each point", () => {
  it("a distinctive value of an output is on the page from the point its call completed, not before", async () => {
    for (const turn of [0, 3]) {
      const at = completedAt(turn);
      expect(at).toBeGreaterThan(0);
      expect(await pageAt(at - 1)).not.toContain(needle(turn));
      expect(await pageAt(at)).toContain(needle(turn));
    }
  });

  it("at the last point, the full output of every call (the first too) and the digest of each in the lean log", async () => {
    const text = await pageAt(entries.length);
    for (let turn = 0; turn < TURNS; turn++) expect(text).toContain(needle(turn));
    const lean = await rebuildToolCallLog(journal, "long-1", "lean");
    expect(lean).toHaveLength(TURNS);
    for (const step of lean) expect(text).toContain(step.digest as string);
  });

  it("the point's part the slider fetches has them too", async () => {
    const at = completedAt(1);
    const part = textOf(await (await fetch(`${viewer.url}/runs/long-1/travel/at/${at}`)).text());
    expect(part).toContain(needle(0));
    expect(part).toContain(needle(1));
    expect(part).not.toContain(needle(2));
  });
});

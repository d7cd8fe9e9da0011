/**
 * A delivered event is a call's output like any other: `deliverEvent` journals it through the
 * same write path as a tool's own output (claim-check past the loop's threshold, digest, and the
 * journal's codec and redaction), so the frame it makes is the frame the tool returning the same
 * value makes, byte for byte.
 */
import { describe, expect, it } from "vitest";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { payloadCodec } from "../../src/events/codec/codec.ts";
import { withCodec } from "../../src/events/codec/codecStore.ts";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { redaction, withRedaction } from "../../src/events/redaction/redact.ts";
import type { BlobStore, Journal } from "../../src/events/spi.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { GenerateRequest } from "../../src/models/types.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { deliverEvent } from "../../src/runtime/control/events.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

const STEP = "shop#turn:0:tool:0";
const THRESHOLD = 1024;
/** About 5 kB of canonical JSON: past the threshold. */
const PAYLOAD = { paid: 4200, card: "4111-1111-1111-1111", receipt: "line of the receipt ".repeat(250) };

/** A journal with blobs, and the raw store and blobs under whatever wraps it. */
function journalWith(wrap: (j: Journal) => Journal) {
  const raw = { store: memoryStore({ json: true }), blobs: memoryBlobStore() };
  return { raw, journal: wrap(createJournal(raw)) };
}

/** The loop: `pay` waits for the payment event (`waits`), or returns the payment itself. */
function shop(journal: Journal, waits: boolean, blobs: BlobStore | undefined = journal.blobs) {
  const tokens: string[] = [];
  const pay: Tool<{ order: string }> = {
    description: "takes the payment",
    execute: (_input, ctx) => {
      if (!waits) return PAYLOAD;
      const wait = ctx.waitForEvent({ what: "the payment" });
      tokens.push(wait.token);
      return wait;
    },
  };
  const scripted = scriptedModel([
    { toolCalls: [{ id: "p", name: "pay", input: { order: "o-1" } }] },
    { content: "paid", toolCalls: [] },
  ]);
  const fed: unknown[] = []; // what the model was sent as the call's result
  const model = {
    ...scripted,
    stream: undefined,
    generate: (request: GenerateRequest) => {
      const last = request.messages.at(-1);
      if (last?.role === "tool") fed.push(last.output);
      return scripted.generate(request);
    },
  };
  const claimCheck = blobs === undefined ? {} : { claimCheck: { blobs, thresholdBytes: THRESHOLD } };
  return { loop: agentLoop$({ id: "shop", model, tools: { pay }, ...claimCheck }), tokens, fed };
}

const completion = (entries: readonly JournalEntry[]) =>
  entries.find((e) => e.type === "frame.completed" && e.data.frameId === STEP)?.data as
    | { claimChecked?: true; output: { ref?: string } }
    | undefined;

const WRAPS: [string, (j: Journal) => Journal][] = [
  ["a plain journal", (j) => j],
  ["a journal with a codec", (j) => withCodec(j, payloadCodec({ compress: "brotli", minBytes: 1 }))],
  [
    "a journal with a codec and redaction",
    (j) =>
      withRedaction(withCodec(j, payloadCodec({ compress: "brotli", minBytes: 1 })), redaction({ paths: ["$.card"] })),
  ],
];

describe("deliverEvent: the payload goes through the tool output's write path", () => {
  it.each(WRAPS)(
    "%s: a 5 kB payload past a 1 kB threshold is claim-checked, its frame the one the tool's own output makes",
    async (_name, wrap) => {
      const waited = journalWith(wrap);
      const waiting = shop(waited.journal, true);
      await waiting.loop.run({ runId: "r", journal: waited.journal, input: "buy" }).catch(() => {});
      await deliverEvent(waited.journal, waiting.tokens[0] as string, PAYLOAD);

      const ran = journalWith(wrap);
      const returned = await shop(ran.journal, false).loop.run({ runId: "r", journal: ran.journal, input: "buy" });

      const delivered = completion(await readJournal(waited.journal, "r"));
      expect(delivered?.claimChecked).toBe(true);
      expect(JSON.stringify(delivered).length).toBeLessThan(THRESHOLD); // the envelope, not the payload
      expect(delivered).toEqual(completion(await readJournal(ran.journal, "r"))); // digest and envelope included
      // What the stores hold: no payload inline; the blob through the codec (and redacted) like the tool's.
      const stored = JSON.stringify(await waited.raw.store.read("r"));
      expect(stored).not.toContain("line of the receipt");
      const ref = delivered?.output.ref as string;
      const blob = Buffer.from(await waited.raw.blobs.get(ref));
      expect(blob.equals(Buffer.from(await ran.raw.blobs.get(ref)))).toBe(true);
      if (wrap !== WRAPS[0]?.[1]) expect(blob.toString("latin1")).not.toContain("line of the receipt");

      // The run goes on with it (the model fed the payload), and ends as the run whose tool returned it.
      // A redacting journal refuses to resume a run whose history it redacted: that is its rule.
      if (wrap === WRAPS[2]?.[1]) return;
      const resumed = await waiting.loop.run({ runId: "r", journal: waited.journal });
      expect(JSON.stringify(resumed)).toBe(JSON.stringify(returned));
      expect(waiting.fed).toEqual([PAYLOAD]);
    },
  );

  it("a payload under the threshold is journaled inline, as the tool's would be", async () => {
    const small = { paid: 1 };
    const { journal } = journalWith((j) => j);
    const waiting = shop(journal, true);
    await waiting.loop.run({ runId: "r", journal, input: "buy" }).catch(() => {});
    await deliverEvent(journal, waiting.tokens[0] as string, small);
    const data = completion(await readJournal(journal, "r"));
    expect(data).toMatchObject({ output: small });
    expect(data?.claimChecked).toBeUndefined();
  });

  it("the wait records the loop's threshold when its claim-check blobs are the journal's; otherwise the payload stays inline", async () => {
    const { journal } = journalWith((j) => j);
    const recorded = shop(journal, true);
    await recorded.loop.run({ runId: "same", journal, input: "buy" }).catch(() => {});
    const [wait] = (await readJournal(journal, "same")).filter((e) => e.type === "decision.recorded");
    expect((wait?.data as { choice?: unknown } | undefined)?.choice).toMatchObject({
      kind: "event",
      claimCheckBytes: THRESHOLD,
    });

    // Blobs a delivering process cannot know of: nothing recorded, the payload inline (docs/waits.md).
    const elsewhere = shop(journal, true, memoryBlobStore());
    await elsewhere.loop.run({ runId: "other", journal, input: "buy" }).catch(() => {});
    await deliverEvent(journal, elsewhere.tokens[0] as string, PAYLOAD);
    expect(completion(await readJournal(journal, "other"))).toMatchObject({ output: PAYLOAD });
    const out = await elsewhere.loop.run({ runId: "other", journal });
    expect(out.content).toBe("paid");
  });
});

import { randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  isPayloadCodecError,
  type KeyProvider,
  type PayloadCodecError,
  type PayloadCodecOptions,
  payloadCodec,
  staticKeys,
} from "../../src/events/codec/codec.ts";
import { withCodec } from "../../src/events/codec/codecStore.ts";
import { compact } from "../../src/events/compact.ts";
import { readJournal } from "../../src/events/journal.ts";
import { readArchived } from "../../src/events/readArchived.ts";
import type { ArchivedFrame, Journal } from "../../src/events/spi.ts";
import type { EntryOf, NewEntry } from "../../src/events/types.ts";
import { frameCompleted, frameStarted, runCompleted, runStarted, turn } from "./entries.ts";

/** What an adapter's test file gives the codec contract: a fresh journal (store, blobs, archive) and its cleanup. */
export interface CodecFixture {
  readonly journal: Journal & { close(): Promise<void> };
  readonly cleanup?: () => Promise<void>;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("expected the promise to reject");
}

const k1 = randomBytes(32);
const k2 = randomBytes(32);
const keys = (current: string, held: Record<string, Uint8Array> = { k1, k2 }): KeyProvider =>
  staticKeys({ current, keys: held });

/** A page of HTML, as a fetch tool returns it: long and repetitive, so it compresses. */
const page = `<html><body>${Array.from({ length: 40 }, (_, i) => `<p class="row">result ${i}: the ledger balances</p>`).join("")}</body></html>`;

/** A run's payload entries, members in a deliberate (non-canonical) order. */
const payloadEntries = (): NewEntry[] => [
  { type: "run.started", data: { loopId: "demo", input: `summarise ${page}`, tools: ["fetch"] } },
  frameStarted("demo#turn:0:model", "model"),
  frameCompleted("demo#turn:0:model", { z: 1, text: "calling fetch", toolCalls: [{ id: "c1", name: "fetch" }] }),
  frameStarted("demo#turn:0:tool:0", "tool:fetch"),
  { type: "frame.completed", data: { frameId: "demo#turn:0:tool:0", output: { url: "x", html: page, a: 1 } } },
  {
    type: "call.settled",
    data: { stepId: "demo#turn:0:tool:1", status: "error", reason: "unknown-tool", result: page },
  } as NewEntry,
  runCompleted({ content: page, iterations: 1 }),
];

/** The codecs every store is held to. */
export const CODECS: ReadonlyArray<readonly [string, PayloadCodecOptions]> = [
  ["gzip", { compress: "gzip" }],
  ["brotli", { compress: "brotli" }],
  ["aes-256-gcm", { encrypt: { keys: keys("k1") } }],
  ["gzip + aes-256-gcm", { compress: "gzip", encrypt: { keys: keys("k1") } }],
];

/**
 * The payload codec on a store: round trips through each codec, key rotation, a wrong or missing
 * key, and a journal written without a codec. Adapter-neutral: it uses the Journal SPI only.
 */
export function codecContract(name: string, open: () => Promise<CodecFixture>): void {
  describe(`payload codec: ${name}`, () => {
    let fixture: CodecFixture;
    let plain: Journal;
    beforeEach(async () => {
      fixture = await open();
      plain = fixture.journal;
    });
    afterEach(async () => {
      await fixture.journal.close();
      await fixture.cleanup?.();
    });

    describe.each(CODECS)("%s", (label, options) => {
      it("reads back every payload exactly as written (member order included), and stores it encoded", async () => {
        const journal = withCodec(plain, payloadCodec(options));
        const written = payloadEntries();
        await journal.store.append("r1", written, { expectedVersion: 0 });
        const read = await readJournal(journal, "r1");
        expect(read.map((e) => JSON.stringify(e.data))).toEqual(written.map((e) => JSON.stringify(e.data)));

        const raw = await plain.store.read("r1");
        const stored = raw.map((e) => JSON.stringify(e.data));
        for (const i of [0, 2, 4, 5, 6]) {
          if (i === 2 && !label.includes("aes")) continue; // a small model response is not worth compressing
          expect(stored[i], `entry ${i}`).toContain('"__loomCodec":1');
          expect(stored[i], `entry ${i}`).not.toContain("the ledger balances");
        }
        expect(stored[4]?.length).toBeLessThan(
          (JSON.stringify(written[4]?.data) ?? "").length * (label === "aes-256-gcm" ? 2 : 0.5),
        );
        expect(stored[1]).toBe(JSON.stringify(written[1]?.data)); // no payload, left as it is
      });

      it("encodes blobs and archived frames, and reads them back", async () => {
        const journal = withCodec(plain, payloadCodec(options));
        const bytes = Buffer.from(JSON.stringify({ html: page }));
        const { ref } = await journal.blobs!.put(bytes);
        expect(Buffer.from(await journal.blobs!.get(ref)).toString()).toBe(bytes.toString());
        expect((await journal.blobs!.put(bytes)).ref, "the same bytes keep their ref").toBe(ref);
        expect(Buffer.from(await plain.blobs!.get(ref)).toString()).not.toContain("the ledger balances");

        await journal.store.append("r2", payloadEntries().slice(0, 5), { expectedVersion: 0 });
        const [, started, , , completed] = await journal.store.read("r2");
        const frame: ArchivedFrame = {
          frameId: "demo#turn:0:tool:0",
          started: started as EntryOf<"frame.started">,
          completed: completed as EntryOf<"frame.completed">,
        };
        const put = await journal.archive!.put("r2", [frame]);
        expect(JSON.stringify(await journal.archive!.get(put.ref))).toBe(JSON.stringify([frame]));
        expect(JSON.stringify(await plain.archive!.get(put.ref))).not.toContain("the ledger balances");
      });
    });

    it("compacts through the codec: the archive holds the moved frames encoded, and reads them back", async () => {
      const journal = withCodec(plain, payloadCodec({ compress: "gzip", minBytes: 1, encrypt: { keys: keys("k1") } }));
      const output = (i: number, j: number) => ({ i, j, html: page });
      const written = [runStarted("demo"), ...[0, 1, 2].flatMap((i) => turn("demo", i, 2, (j) => output(i, j)))];
      await journal.store.append("r7", written, { expectedVersion: 0 });
      const result = await compact(journal, "r7", { keepTurns: 1 });
      expect(result.frameIds).toHaveLength(4);
      const frame = await readArchived(journal, "demo#turn:0:tool:1", { runId: "r7" });
      expect(JSON.stringify(frame?.completed.data)).toBe(
        JSON.stringify({ frameId: "demo#turn:0:tool:1", output: output(0, 1) }),
      );
      expect(JSON.stringify(await plain.archive!.get(result.archiveRef!))).not.toContain("the ledger balances");
      expect((await readJournal(journal, "r7")).at(-1)?.type).toBe("frames.archived");
    });

    it("reads entries written under key k1 after the provider's current key becomes k2", async () => {
      const before = withCodec(plain, payloadCodec({ compress: "gzip", encrypt: { keys: keys("k1") } }));
      const [first, ...rest] = payloadEntries();
      await before.store.append("r3", [first as NewEntry], { expectedVersion: 0 });
      const after = withCodec(plain, payloadCodec({ compress: "gzip", encrypt: { keys: keys("k2") } }));
      await after.store.append("r3", rest, { expectedVersion: 1 });
      const read = await readJournal(after, "r3");
      expect(read.map((e) => JSON.stringify(e.data))).toEqual(payloadEntries().map((e) => JSON.stringify(e.data)));
      const raw = await plain.store.read("r3");
      expect(JSON.stringify(raw[0]?.data)).toContain('"keyId":"k1"');
      expect(JSON.stringify(raw[6]?.data)).toContain('"keyId":"k2"');
    });

    it("refuses a wrong or a missing key with an error naming the key id, and writes nothing", async () => {
      const writer = withCodec(plain, payloadCodec({ encrypt: { keys: keys("k1") } }));
      await writer.store.append("r4", payloadEntries().slice(0, 3), { expectedVersion: 0 });

      const wrong = withCodec(plain, payloadCodec({ encrypt: { keys: keys("k2", { k1: k2, k2 }) } }));
      const e1 = (await rejection(wrong.store.read("r4"))) as PayloadCodecError;
      expect(isPayloadCodecError(e1) && e1.code).toBe("keyRejected");
      expect(e1.keyId).toBe("k1");
      expect(e1.message).toMatch(/run r4 seq 1 \(input\).*key "k1"/);

      const lost = withCodec(plain, payloadCodec({ encrypt: { keys: keys("k2", { k2 }) } }));
      const e2 = (await rejection(lost.store.read("r4"))) as PayloadCodecError;
      expect([e2.code, e2.keyId]).toEqual(["keyMissing", "k1"]);

      const missing = withCodec(plain, payloadCodec({ encrypt: { keys: keys("k9") } }));
      const e3 = (await rejection(
        missing.store.append("r4", payloadEntries().slice(3), { expectedVersion: 3 }),
      )) as PayloadCodecError;
      expect([e3.code, e3.keyId]).toEqual(["keyMissing", "k9"]);
      expect(e3.message).toContain('no key "k9"');
      const short = withCodec(plain, payloadCodec({ encrypt: { keys: keys("k3", { k3: k1.subarray(0, 16) }) } }));
      const e4 = (await rejection(
        short.store.append("r4", payloadEntries().slice(3), { expectedVersion: 3 }),
      )) as PayloadCodecError;
      expect([e4.code, e4.keyId]).toEqual(["keyInvalid", "k3"]);
      expect(await plain.store.read("r4")).toHaveLength(3);
      expect((await plain.store.listRuns()).find((r) => r.runId === "r4")?.version).toBe(3);
    });

    it("reads a journal written without a codec as today, a look-alike envelope included", async () => {
      const forged = { __loomCodec: 1, codec: ["aes-256-gcm"], keyId: "k1", data: "AAAA" };
      const written = [...payloadEntries(), frameStarted("f"), frameCompleted("f", forged)];
      await plain.store.append("r5", written, { expectedVersion: 0 });
      const journal = withCodec(plain, payloadCodec({ compress: "brotli", encrypt: { keys: keys("k1") } }));
      const read = await readJournal(journal, "r5");
      expect(read.map((e) => JSON.stringify(e.data))).toEqual(written.map((e) => JSON.stringify(e.data)));
      const blob = Buffer.from('{"plain":true}');
      const { ref } = await plain.blobs!.put(blob);
      expect(Buffer.from(await journal.blobs!.get(ref)).toString()).toBe('{"plain":true}');
    });

    it("leaves a payload under 1 KiB, or one its envelope would not shrink, as it is, and reads it back", async () => {
      // 900 bytes of markup: gzip takes it to a fifth, but below the default 1 KiB it stays text.
      const short = { html: page.slice(0, 890) };
      // 150 hex digits: gzip saves a third of them, its envelope (base64, and the marks) adds more.
      const hex = randomBytes(75).toString("hex");
      expect(gzipSync(Buffer.from(JSON.stringify(hex))).byteLength).toBeLessThan(JSON.stringify(hex).length);
      const written = [
        frameStarted("a"),
        frameCompleted("a", short),
        frameStarted("b"),
        frameCompleted("b", hex),
        frameStarted("c"),
        frameCompleted("c", { html: page }),
      ];
      await withCodec(plain, payloadCodec({ compress: "gzip" })).store.append("r7", written.slice(0, 2), {
        expectedVersion: 0,
      });
      await withCodec(plain, payloadCodec({ compress: "gzip", minBytes: 1 })).store.append("r7", written.slice(2), {
        expectedVersion: 2,
      });
      const stored = (await plain.store.read("r7")).map((e) => JSON.stringify(e.data));
      expect(stored[1]).toBe(JSON.stringify(written[1]?.data));
      expect(stored[3]).toBe(JSON.stringify(written[3]?.data));
      expect(stored[5]).toContain('"__loomCodec":1'); // long and repetitive: compressed
      const read = await readJournal(withCodec(plain, payloadCodec({ compress: "gzip" })), "r7");
      expect(read.map((e) => JSON.stringify(e.data))).toEqual(written.map((e) => JSON.stringify(e.data)));
    });

    it("reads a short payload an earlier Loom compressed (from 256 bytes, whatever its envelope) as written", async () => {
      const value = { z: "the ledger balances", a: [1, 2, 3], note: "short" };
      const envelope = { __loomCodec: 1, codec: ["gzip"], data: gzipSync(JSON.stringify(value)).toString("base64") };
      await plain.store.append(
        "r8",
        [
          frameStarted("f"),
          { type: "frame.completed", data: { frameId: "f", output: envelope, encoded: ["output"] } } as NewEntry,
        ],
        { expectedVersion: 0 },
      );
      const read = await readJournal(withCodec(plain, payloadCodec({ compress: "gzip" })), "r8");
      expect(JSON.stringify(read[1]?.data)).toBe(JSON.stringify({ frameId: "f", output: value }));
    });

    it("refuses to hand encoded entries to a reader opened without the codec, naming the key", async () => {
      const journal = withCodec(plain, payloadCodec({ compress: "gzip", encrypt: { keys: keys("k2") } }));
      await journal.store.append("r6", payloadEntries(), { expectedVersion: 0 });
      const e = (await rejection(readJournal(plain, "r6"))) as PayloadCodecError;
      expect(isPayloadCodecError(e) && e.code).toBe("codecRequired");
      expect(e.message).toMatch(/run r6 seq 1: its input is encoded \(gzip \+ aes-256-gcm, key k2\)/);
    });
  });
}

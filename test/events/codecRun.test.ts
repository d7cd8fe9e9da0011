import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { payloadCodec, staticKeys } from "../../src/events/codec/codec.ts";
import { withCodec } from "../../src/events/codec/codecStore.ts";
import { type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { redaction, withRedaction } from "../../src/events/redaction/redact.ts";
import type { BlobStore } from "../../src/events/spi.ts";
import { resolveStep } from "../../src/runtime/base/readers.ts";
import { kitchenSink } from "../support/kitchenSink.ts";
import { logsOf } from "../support/loop.ts";
import { tempDir } from "./tmp.ts";

/**
 * A whole run through the codec: the digests (ADR 0142 D2) are taken over the plaintext before
 * the codec sees anything, so the run's value and both logs are byte-identical to the same run on
 * a journal without it, while what the store holds is encoded.
 */
describe("a loop run on a journal with the payload codec", () => {
  let tmp: ReturnType<typeof tempDir>;
  let plainJournal: OpenJournal;
  let codedFile: OpenJournal;
  beforeEach(() => {
    tmp = tempDir();
    plainJournal = openSqliteJournal(tmp.file("plain.db"));
    codedFile = openSqliteJournal(tmp.file("coded.db"));
  });
  afterEach(async () => {
    await plainJournal.close();
    await codedFile.close();
    tmp.remove();
  });

  it.each(["full", "lean"] as const)(
    "%s: ends with the same value and the same full and lean logs (digests included), stored encoded",
    async (mode) => {
      const codec = payloadCodec({
        compress: "brotli",
        minBytes: 1,
        encrypt: { keys: staticKeys({ current: "k1", keys: { k1: randomBytes(32) } }) },
      });
      const coded = withCodec(codedFile, codec);
      const blobs = memoryBlobStore(); // the same blobs for both: claim-check envelopes name the same refs
      const plainRun = await kitchenSink({ turns: 6, mode, blobs }).loop.run({
        runId: "r",
        input: "go",
        journal: plainJournal,
      });
      const codedRun = await kitchenSink({ turns: 6, mode, blobs }).loop.run({
        runId: "r",
        input: "go",
        journal: coded,
      });
      expect(JSON.stringify(codedRun)).toBe(JSON.stringify(plainRun));
      expect(await logsOf(coded, "r")).toEqual(await logsOf(plainJournal, "r"));
      // Served again from the journal: the completed run's recorded value, decoded.
      const again = await kitchenSink({ turns: 6, mode, blobs }).loop.run({ runId: "r", journal: coded });
      expect(JSON.stringify(again)).toBe(JSON.stringify(plainRun));
      const raw = JSON.stringify(await codedFile.store.read("r"));
      expect(raw).toContain('"__loomCodec":1');
      expect(raw).not.toContain("short page 1");
      expect(JSON.stringify(await plainJournal.store.read("r"))).toContain("short page 1");
    },
  );

  it.each(["codec", "codec and redaction"] as const)(
    "resolveStep reads a claim-checked output whose blob went through the %s",
    async (wrap) => {
      const codec = payloadCodec({
        compress: "gzip",
        encrypt: { keys: staticKeys({ current: "k1", keys: { k1: randomBytes(32) } }) },
      });
      const encoded = withCodec(codedFile, codec);
      const coded = wrap === "codec" ? encoded : withRedaction(encoded, redaction({ paths: ["$..nothingHere"] }));
      await kitchenSink({ turns: 6, mode: "full", blobs: coded.blobs as BlobStore }).loop.run({
        runId: "r",
        input: "go",
        journal: coded,
      });
      await kitchenSink({ turns: 6, mode: "full", blobs: plainJournal.blobs as BlobStore }).loop.run({
        runId: "r",
        input: "go",
        journal: plainJournal,
      });
      const checked = (await readJournal(coded, "r")).filter(
        (e) => e.type === "frame.completed" && (e.data as { claimChecked?: boolean }).claimChecked === true,
      );
      expect(checked.length).toBeGreaterThan(0);
      for (const entry of checked) {
        const stepId = (entry.data as { frameId: string }).frameId;
        const step = await resolveStep(coded, stepId, { runId: "r" });
        const plain = await resolveStep(plainJournal, stepId, { runId: "r" });
        expect(step.claimCheck).toBeDefined();
        expect(step.output).toEqual(plain.output);
      }
    },
  );
});

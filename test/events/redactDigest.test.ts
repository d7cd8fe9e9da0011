import { randomBytes } from "node:crypto";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { digestOf } from "../../src/core/digest.ts";
import { staticKeys } from "../../src/events/codec/codec.ts";
import { compact } from "../../src/events/compact.ts";
import { openSqliteJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import {
  isRedactionError,
  type RedactionOptions,
  redactedFields,
  redaction,
  verifyRedacted,
  withRedaction,
} from "../../src/events/redaction/redact.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { otelTelemetry } from "../../src/otel.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import { showStep } from "../../src/read/step.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { dropSchema, freshSchema, PG_URL } from "../postgres/pg.ts";
import { jsonJournal, logsOf } from "../support/loop.ts";
import { tempDir } from "./tmp.ts";

/**
 * The digest modes: a plain digest of a redacted original lets a reader test guesses (a 6-digit
 * PIN falls to hashing the candidates); a keyed one (HMAC under the provider's key) does not, in
 * the record, the frame's digest, the lean log or the spans, and an auditor with the key verifies.
 */

const PIN = "424242";
const original = { account: "acme", pin: PIN };
const key = randomBytes(32);
const keys = staticKeys({ current: "audit-1", keys: { "audit-1": key } });

const loop = (telemetry?: ReturnType<typeof otelTelemetry>) =>
  agentLoop$({
    id: "bank",
    model: scriptedModel([
      { toolCalls: [{ id: "a", name: "pin", input: { account: "acme" } }] },
      { content: "done", toolCalls: [] },
    ]),
    tools: { pin: { description: "reads a PIN", execute: () => original } },
    toolCallLog: "lean",
    ...(telemetry === undefined ? {} : { telemetry }),
  });

async function redactedRun(options: RedactionOptions, plain: Journal = jsonJournal(memoryStore({ json: true }))) {
  await loop().run({ runId: "r", input: "pin?", journal: withRedaction(plain, redaction(options)) });
  const entries = await plain.store.read("r");
  const frame = entries.find((e) => e.type === "frame.completed" && e.data.frameId === "bank#turn:0:tool:0");
  return { plain, entries, frame: frame as JournalEntry, text: JSON.stringify(entries) };
}

/** The guesses a reader of the journal tries: every 6-digit PIN near the real one, hashed as the output would be. */
function guess(digests: readonly (string | null | undefined)[]): string | undefined {
  for (let n = 420_000; n < 430_000; n++) {
    const d = digestOf({ account: "acme", pin: String(n) }).digest;
    if (digests.includes(d)) return String(n);
  }
  return undefined;
}

describe("redaction digests", () => {
  it("plain: the record's digest and the frame's give the redacted PIN to whoever hashes guesses", async () => {
    const { frame, text } = await redactedRun({ paths: ["$.pin"] });
    expect(text).not.toContain(PIN);
    const [record] = redactedFields(frame.data);
    expect(guess([record?.digest])).toBe(PIN);
    expect(guess([(frame.data as { digest?: string }).digest])).toBe(PIN);
  });

  it("keyed: nothing stored or rebuilt lets a guess be tested; the record keeps no length", async () => {
    const { plain, frame, text } = await redactedRun({ paths: ["$.pin"], digest: { keys } });
    const [record] = redactedFields(frame.data);
    expect(record?.digest).toMatch(/^hmac-sha256:audit-1:[0-9a-f]{64}$/);
    expect(record).not.toHaveProperty("bytes");
    expect((frame.data as { digest?: string }).digest).toBe(record?.digest); // the lean log's digest, keyed
    expect(text).not.toContain(digestOf(original).digest as string);
    const { lean } = await logsOf(plain, "r");
    expect(lean).toContain(record?.digest as string);
    expect(lean).not.toContain(digestOf(original).digest as string);
    const everyHex = [...text.matchAll(/[0-9a-f]{64}/g)].map((m) => m[0]);
    expect(guess(everyHex)).toBeUndefined();
    // What `loom show` and the viewer's step page print of the step.
    const shown = await showStep(plain, "bank#turn:0:tool:0", "r");
    expect(shown.digest).toBe(record?.digest);
    expect(JSON.stringify(shown)).not.toContain(digestOf(original).digest as string);
  });

  it("keyed: an auditor with the key verifies the original; without it, or with another, nothing verifies", async () => {
    const { frame } = await redactedRun({ paths: ["$.pin"], digest: { keys } });
    expect(verifyRedacted(original, frame, { key })).toMatchObject({ ok: true, reproduced: true });
    expect(verifyRedacted({ ...original, pin: "424243" }, frame, { key }).ok).toBe(false);
    const without = verifyRedacted(original, frame);
    expect(without.ok).toBe(false);
    expect(without.reason).toContain('"audit-1"');
    expect(verifyRedacted(original, frame, { key: randomBytes(32) }).ok).toBe(false);
  });

  it("keyed: SQLite and PostgreSQL keep the keyed digest as written (not a sha256 column)", async () => {
    const tmp = tempDir();
    const sqlite = openSqliteJournal(tmp.file("keyed.db"));
    const schema = freshSchema("keyed");
    const pg = PG_URL === undefined ? undefined : openPostgresJournal(PG_URL, { schema });
    try {
      for (const journal of pg === undefined ? [sqlite] : [sqlite, pg]) {
        const { frame } = await redactedRun({ paths: ["$.pin"], digest: { keys } }, journal);
        const [record] = redactedFields(frame.data);
        expect((frame.data as { digest?: string }).digest).toBe(record?.digest);
        expect(record?.digest).toMatch(/^hmac-sha256:audit-1:/);
        expect((await logsOf(journal, "r")).lean).toContain(record?.digest as string);
        expect(verifyRedacted(original, frame, { key }).ok).toBe(true);
        // Compacted: the marker keeps the keyed digest the frame recorded, and the lean log is unchanged.
        const before = (await logsOf(journal, "r")).lean;
        await compact(journal, "r", { keepTurns: 0 });
        const marker = (await journal.store.read("r")).find((e) => e.type === "frames.archived");
        expect(JSON.stringify(marker?.data)).toContain(record?.digest as string);
        expect((await logsOf(journal, "r")).lean).toBe(before);
      }
    } finally {
      await sqlite.close();
      tmp.remove();
      if (pg !== undefined) {
        await pg.close();
        await dropSchema(schema);
      }
    }
  });

  it("keyed, with no key in the provider: refuses the append with digestKeyMissing, nothing written", async () => {
    const plain = jsonJournal(memoryStore({ json: true }));
    const empty = staticKeys({ current: "gone", keys: {} });
    const journal = withRedaction(plain, redaction({ paths: ["$.pin"], digest: { keys: empty } }));
    const e = await loop()
      .run({ runId: "r", input: "pin?", journal })
      .catch((x: unknown) => x);
    expect(isRedactionError(e) && e.code).toBe("digestKeyMissing");
    const stored = JSON.stringify(await plain.store.read("r"));
    expect(stored).not.toContain(PIN);
  });

  it("spans carry the keyed digest of a redacted output, never the plain one; logDigest: false leaves output digests out", async () => {
    const spansOf = async (logDigest: boolean) => {
      const exporter = new InMemorySpanExporter();
      const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
      const telemetry = otelTelemetry({ tracer: provider.getTracer("t"), logDigest });
      const plain = jsonJournal();
      const journal = withRedaction(plain, redaction({ paths: ["$.pin"], digest: { keys } }));
      await loop(telemetry).run({ runId: "r", input: "pin?", journal });
      const entries = await plain.store.read("r");
      const frame = entries.find((e) => e.type === "frame.completed" && e.data.frameId === "bank#turn:0:tool:0");
      const keyed = (frame?.data as { digest?: string } | undefined)?.digest as string;
      return { keyed, text: JSON.stringify(exporter.getFinishedSpans().map((s) => s.attributes)) };
    };
    const plainDigest = digestOf(original).digest as string;
    const shown = await spansOf(true);
    expect(shown.keyed).toMatch(/^hmac-sha256:audit-1:/);
    expect(shown.text).toContain(shown.keyed);
    expect(shown.text).not.toContain(plainDigest);
    const withheld = await spansOf(false);
    expect(withheld.text).not.toContain(plainDigest);
    expect(withheld.text).not.toContain(withheld.keyed);
    expect(withheld.text).not.toContain("loom.log.digest");
    expect(withheld.text).not.toContain("loom.output.digest");
  });
});

import { randomBytes } from "node:crypto";
import { SpanStatusCode } from "@opentelemetry/api";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { digestOf } from "../../src/core/digest.ts";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { staticKeys } from "../../src/events/codec/codec.ts";
import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { redactedFields, redaction, withRedaction } from "../../src/events/redaction/redact.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { otelTelemetry } from "../../src/otel.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

/** Model and tool spans carry the digests and sizes the journal records; keyed redaction keeps plain ones off. */

const PIN = "424242";
const secret = { account: "acme", pin: PIN };
const keys = staticKeys({ current: "audit-1", keys: { "audit-1": randomBytes(32) } });

function traced() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { exporter, telemetry: otelTelemetry({ tracer: provider.getTracer("loom-test") }) };
}

/** Reads a PIN, then (the model repeating it) checks it with a second tool. */
const bank = (telemetry: ReturnType<typeof otelTelemetry>) =>
  agentLoop$({
    id: "bank",
    model: scriptedModel([
      { toolCalls: [{ id: "a", name: "pin", input: { account: "acme" } }] },
      { content: `checking ${PIN}`, toolCalls: [{ id: "b", name: "check", input: { pin: PIN } }] },
      { content: "done", toolCalls: [] },
    ]),
    tools: {
      pin: { description: "reads a PIN", execute: () => secret },
      check: { description: "checks a PIN", execute: () => ({ ok: true }) },
    },
    telemetry,
  });

const step = (spans: ReadableSpan[], stepId: string) => {
  const span = spans.find((s) => s.attributes["loom.step.id"] === stepId);
  if (span === undefined) throw new Error(`no span of ${stepId}`);
  return span;
};
const entryOf = (entries: JournalEntry[], type: string, frameId: string) =>
  entries.find((e) => e.type === type && (e.data as { frameId?: string }).frameId === frameId)?.data as Record<
    string,
    unknown
  >;

describe("span digests", () => {
  it("tool and model spans carry the digests and sizes of their input and output, equal to the journal's", async () => {
    const { exporter, telemetry } = traced();
    const journal = jsonJournal(memoryStore({ json: true }));
    await bank(telemetry).run({ runId: "r", input: "pin?", journal });
    const entries = await journal.store.read("r");
    const spans = exporter.getFinishedSpans();

    const toolStarted = entryOf(entries, "frame.started", "bank#turn:0:tool:0");
    const toolCompleted = entryOf(entries, "frame.completed", "bank#turn:0:tool:0");
    expect(step(spans, "bank#turn:0:tool:0").attributes).toMatchObject({
      "loom.input.digest": toolStarted.inputDigest,
      "loom.input.bytes": digestOf({ account: "acme" }).bytes,
      "loom.output.digest": toolCompleted.digest,
      "loom.output.bytes": toolCompleted.bytes,
      "loom.log.digest": toolCompleted.digest,
    });

    for (const turn of [0, 1, 2]) {
      const frameId = `bank#turn:${turn}:model`;
      const response = digestOf(entryOf(entries, "frame.completed", frameId).output);
      expect(step(spans, frameId).attributes).toMatchObject({
        "loom.input.digest": entryOf(entries, "frame.started", frameId).inputDigest,
        "loom.output.digest": response.digest,
        "loom.output.bytes": response.bytes,
      });
    }
  });

  it("under keyed redaction no span holds a plain digest or the size of a redacted value; the journal's keyed digest is there", async () => {
    const { exporter, telemetry } = traced();
    const plain = jsonJournal(memoryStore({ json: true }));
    const journal = withRedaction(plain, redaction({ paths: ["$.pin"], values: [PIN], digest: { keys } }));
    await bank(telemetry).run({ runId: "r", input: "pin?", journal });
    const entries = await plain.store.read("r");
    const spans = exporter.getFinishedSpans();
    const everything = JSON.stringify(spans.map((s) => ({ attributes: s.attributes, events: s.events })));

    // The plain digests a reader would test guesses against: the secret output, the input that repeats it.
    const plainOutput = digestOf(secret).digest as string;
    const plainInput = entryOf(entries, "frame.started", "bank#turn:1:tool:0").inputDigest as string;
    expect(plainInput).toBe(digestOf({ pin: PIN }).digest);
    for (const digest of [plainOutput, plainInput, digestOf(PIN).digest as string])
      expect(everything).not.toContain(digest);
    expect(everything).not.toContain(PIN);

    // The redacted output's span: the journal's keyed digest, and no size.
    const frame = entryOf(entries, "frame.completed", "bank#turn:0:tool:0");
    expect(frame.digest).toMatch(/^hmac-sha256:audit-1:[0-9a-f]{64}$/);
    const tool = step(spans, "bank#turn:0:tool:0").attributes;
    expect(tool["loom.output.digest"]).toBe(frame.digest);
    expect(tool["loom.log.digest"]).toBe(frame.digest);
    expect(tool).not.toHaveProperty("loom.output.bytes");
    expect(tool["loom.input.digest"]).toBe(entryOf(entries, "frame.started", "bank#turn:0:tool:0").inputDigest); // not redacted

    // The call whose input repeats the PIN: no input digest or size.
    expect(step(spans, "bank#turn:1:tool:0").attributes).not.toHaveProperty("loom.input.digest");
    expect(step(spans, "bank#turn:1:tool:0").attributes).not.toHaveProperty("loom.input.bytes");

    // The response that repeats it: its record's keyed digest, and no size.
    const [record] = redactedFields(entryOf(entries, "frame.completed", "bank#turn:1:model"));
    expect(record?.digest).toMatch(/^hmac-sha256:audit-1:/);
    const model = step(spans, "bank#turn:1:model").attributes;
    expect(model["loom.output.digest"]).toBe(record?.digest);
    expect(model).not.toHaveProperty("loom.output.bytes");
    // A prompt holding a redacted value has no digest on its span; the first, which holds none, has.
    expect(model).not.toHaveProperty("loom.input.digest");
    expect(step(spans, "bank#turn:0:model").attributes["loom.input.digest"]).toBe(
      entryOf(entries, "frame.started", "bank#turn:0:model").inputDigest,
    );
  });

  it("under keyed redaction a failed tool whose error repeats a redacted value has no output digest or size on its span", async () => {
    const { exporter, telemetry } = traced();
    const plain = jsonJournal(memoryStore({ json: true }));
    const journal = withRedaction(plain, redaction({ values: [PIN], digest: { keys } }));
    const seen: unknown[] = [];
    const loop = agentLoop$({
      id: "bank",
      model: scriptedModel([
        { toolCalls: [{ id: "a", name: "pin", input: { account: "acme" } }] },
        { content: "done", toolCalls: [] },
      ]),
      tools: {
        pin: {
          description: "reads a PIN",
          execute: () => {
            throw new Error(`PIN ${PIN} is locked`);
          },
        },
      },
      telemetry,
    });
    await loop.run({ runId: "r", input: "pin?", journal, onEvent: (e) => seen.push(e) });
    // The run's own listener saw the failure before redaction: its plain digest is what must stay off the span.
    const finished = seen.find((e) => (e as { type: string }).type === "tool-finished") as { digest: string };
    expect(finished.digest).toMatch(/^[0-9a-f]{64}$/);
    const tool = step(exporter.getFinishedSpans(), "bank#turn:0:tool:0");
    expect(tool.status.code).toBe(SpanStatusCode.ERROR);
    expect(tool.attributes).not.toHaveProperty("loom.output.digest");
    expect(tool.attributes).not.toHaveProperty("loom.output.bytes");
    expect(JSON.stringify(exporter.getFinishedSpans().map((s) => [s.attributes, s.events]))).not.toContain(
      finished.digest,
    );
  });

  it("under keyed redaction a run whose input was redacted has no prompt digest on any model span", async () => {
    const { exporter, telemetry } = traced();
    const plain = jsonJournal(memoryStore({ json: true }));
    const journal = withRedaction(plain, redaction({ values: [PIN], digest: { keys } }));
    await bank(telemetry).run({ runId: "r", input: `my PIN is ${PIN}`, journal });
    const entries = await plain.store.read("r");
    expect(redactedFields(entries[0]?.data)).toHaveLength(1); // run.started
    const models = exporter.getFinishedSpans().filter((s) => s.attributes["gen_ai.operation.name"] === "chat");
    expect(models).toHaveLength(3);
    for (const model of models) expect(model.attributes).not.toHaveProperty("loom.input.digest");
  });

  it("under keyed redaction a claim-checked output's span carries the record's keyed digest, not the envelope's, and no size", async () => {
    const { exporter, telemetry } = traced();
    const plain = createJournal({ store: memoryStore({ json: true }), blobs: memoryBlobStore() });
    const journal = withRedaction(plain, redaction({ paths: ["$.pin"], digest: { keys } }));
    const big = { ...secret, note: "x".repeat(200) };
    const loop = agentLoop$({
      id: "bank",
      model: scriptedModel([
        { toolCalls: [{ id: "a", name: "pin", input: { account: "acme" } }] },
        { content: "done", toolCalls: [] },
      ]),
      tools: { pin: { description: "reads a PIN", execute: () => big } },
      claimCheck: { blobs: journal.blobs as NonNullable<typeof journal.blobs>, thresholdBytes: 50 },
      telemetry,
    });
    await loop.run({ runId: "r", input: "pin?", journal });
    const frame = entryOf(await plain.store.read("r"), "frame.completed", "bank#turn:0:tool:0");
    expect(frame.claimChecked).toBe(true);
    const [record] = redactedFields(frame);
    expect(record?.digest).toMatch(/^hmac-sha256:audit-1:/);
    const spans = exporter.getFinishedSpans();
    const tool = step(spans, "bank#turn:0:tool:0").attributes;
    expect(tool["loom.output.digest"]).toBe(record?.digest);
    expect(tool).not.toHaveProperty("loom.output.bytes");
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain(digestOf(big).digest as string);
  });

  it("under plain redaction spans carry the journal's digests of redacted payloads, as the journal does", async () => {
    const { exporter, telemetry } = traced();
    const plain = jsonJournal(memoryStore({ json: true }));
    await bank(telemetry).run({
      runId: "r",
      input: "pin?",
      journal: withRedaction(plain, redaction({ paths: ["$.pin"] })),
    });
    const entries = await plain.store.read("r");
    const frame = entryOf(entries, "frame.completed", "bank#turn:0:tool:0");
    expect(frame.digest).toBe(digestOf(secret).digest);
    expect(step(exporter.getFinishedSpans(), "bank#turn:0:tool:0").attributes).toMatchObject({
      "loom.output.digest": frame.digest,
      "loom.output.bytes": frame.bytes,
    });
  });
});

import { describe, expect, it } from "vitest";
import { digestOf } from "../../src/core/digest.ts";
import { memoryStore } from "../../src/events/memory.ts";
import {
  isRedactionError,
  type RedactionError,
  redactedFields,
  redaction,
  verifyRedacted,
  withRedaction,
} from "../../src/events/redaction/redact.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { jsonJournal } from "../support/loop.ts";

const SSN = "123-45-6789";
const SSN_PATTERN = /\b\d{3}-\d{2}-\d{4}\b/;
const at = { runId: "r", type: "frame.completed", field: "output" } as const;

function thrown(f: () => unknown): RedactionError {
  try {
    f();
  } catch (e) {
    return e as RedactionError;
  }
  throw new Error("expected a throw");
}

/** A lookup returns the SSN under `ssn`; the model then repeats it in its answer and in a second call's input. */
const loop = () =>
  agentLoop$({
    id: "crm",
    model: scriptedModel([
      { toolCalls: [{ id: "a", name: "lookup", input: { name: "Ada" } }] },
      { content: `Found her: ${SSN}.`, toolCalls: [{ id: "b", name: "note", input: { text: `SSN ${SSN} checked` } }] },
      { content: `Ada's SSN is ${SSN}.`, toolCalls: [] },
    ]),
    tools: {
      lookup: { description: "finds a person", execute: () => ({ name: "Ada", ssn: SSN, memo: `id ${SSN}` }) },
      note: { description: "keeps a note", execute: (input) => ({ kept: (input as { text: string }).text }) },
    },
  });

describe("value redaction", () => {
  it("replaces every match in every string at any depth, member names included, and counts them", async () => {
    const r = redaction({ values: [SSN_PATTERN, "Ada"] });
    const done = await r.apply({ a: [`x ${SSN} y ${SSN}`, { [SSN]: "Ada Lovelace" }], n: 1 }, at);
    expect(done?.value).toEqual({ a: ["x [redacted] y [redacted]", { "[redacted]": "[redacted] Lovelace" }], n: 1 });
    expect(done?.record).toEqual({
      field: "output",
      ...digestOf({ a: [`x ${SSN} y ${SSN}`, { [SSN]: "Ada Lovelace" }], n: 1 }),
      paths: [],
      fn: false,
      values: 4,
    });
  });

  it("scans a string that holds JSON text as text, and leaves digests and blob refs alone", async () => {
    const digest = "1234567890".repeat(7).slice(0, 64);
    const r = redaction({ values: [/\d{6}/] });
    const done = await r.apply({ text: JSON.stringify({ pin: "424242" }), digest, ref: `sha256:${digest}` }, at);
    expect(done?.value).toEqual({ text: '{"pin":"[redacted]"}', digest, ref: `sha256:${digest}` });
  });

  it("leaves a payload with no match as it is (no record)", async () => {
    expect(await redaction({ values: [SSN_PATTERN] }).apply({ a: "nothing here" }, at)).toBeUndefined();
  });

  it("refuses an empty value and a pattern that matches the empty string", () => {
    for (const values of [[""], [/x*/]]) {
      const e = thrown(() => redaction({ values }));
      expect(isRedactionError(e)).toBe(true);
      expect(e.code).toBe("badRedactionValue");
    }
  });

  it("verifies an original: the digest, and with the values given, that it reproduces what is stored", async () => {
    const original = { memo: `id ${SSN}`, ssn: SSN };
    const done = await redaction({ paths: ["$.ssn"], values: [SSN_PATTERN] }).apply(original, at);
    const entry = { data: { output: done?.value, redacted: [done?.record] } };
    expect(verifyRedacted(original, entry).reproduced).toBeUndefined(); // value matches recorded, values not given
    expect(verifyRedacted(original, entry).ok).toBe(true);
    expect(verifyRedacted(original, entry, { values: [SSN_PATTERN] })).toMatchObject({ ok: true, reproduced: true });
    expect(verifyRedacted(original, entry, { values: [/nothing/] })).toMatchObject({ ok: false, reproduced: false });
  });

  it("path redaction leaves the value where the model repeats it; value redaction follows it into every entry", async () => {
    const byPath = jsonJournal(memoryStore({ json: true }));
    await loop().run({
      runId: "p",
      input: "find Ada",
      journal: withRedaction(byPath, redaction({ paths: ["$..ssn"] })),
    });
    const pathStored = JSON.stringify(await byPath.store.read("p"));
    expect(pathStored).toContain(SSN); // the answer, the memo, the second call's input: path redaction does not reach them

    const byValue = jsonJournal(memoryStore({ json: true }));
    const live = await loop().run({
      runId: "v",
      input: `find Ada (${SSN})`,
      journal: withRedaction(byValue, redaction({ values: [SSN_PATTERN] })),
    });
    expect(live.content).toContain(SSN); // live, the caller sees the original
    const entries = await byValue.store.read("v");
    expect(JSON.stringify(entries)).not.toContain(SSN);
    const fields = entries.flatMap((e) => redactedFields(e.data).map((r) => `${e.type} ${r.field}`));
    expect(fields).toEqual([
      "run.started input",
      "frame.completed output", // the lookup's output
      "frame.completed output", // the model's answer that repeats it, with the second call's input
      "frame.completed output", // the note's output
      "frame.completed output", // the final answer
      "run.completed output",
    ]);
  });
});

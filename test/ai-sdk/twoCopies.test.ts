import { cpSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { MockLanguageModelV3 } from "ai/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isModelCapabilityError, ModelCapabilityError } from "../../src/models/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { textResult } from "../support/aiSdkResults.ts";
import { jsonJournal } from "../support/loop.ts";

/**
 * Two copies of Loom in one process (a plugin that bundles its own): the model adapter comes from
 * one, the loop from the other. An error the adapter's copy throws is none of the loop's classes,
 * so the loop must know it by its name and code: a model given only `doGenerate` falls back from
 * streaming to `generate` instead of interrupting the run.
 */

const root = resolve(import.meta.dirname, "../..");
let copy = "";
let other: { fromAiSdk: typeof import("../../src/ai-sdk/aiSdk.ts").fromAiSdk };
let otherErrors: typeof import("../../src/models/errors.ts");

beforeAll(async () => {
  copy = mkdtempSync(join(tmpdir(), "loom-second-copy-"));
  cpSync(join(root, "src"), join(copy, "src"), { recursive: true });
  symlinkSync(realpathSync(join(root, "node_modules")), join(copy, "node_modules"), "dir");
  other = await import(pathToFileURL(join(copy, "src/ai-sdk/aiSdk.ts")).href);
  otherErrors = await import(pathToFileURL(join(copy, "src/models/errors.ts")).href);
});

afterAll(() => rmSync(copy, { recursive: true, force: true }));

describe("an adapter from another copy of Loom", () => {
  it("throws errors of its own classes, which this copy still classifies by name and code", async () => {
    const model = other.fromAiSdk(new MockLanguageModelV3({ doGenerate: [] }));
    const thrown = await (async () => {
      for await (const _ of (model.stream as NonNullable<typeof model.stream>)({
        messages: [{ role: "user", content: "hi" }],
        tools: [],
        signal: new AbortController().signal,
      }))
        return undefined;
    })().catch((e: unknown) => e);
    expect(thrown).not.toBeInstanceOf(ModelCapabilityError);
    expect(thrown instanceof otherErrors.ModelCapabilityError).toBe(true);
    expect(isModelCapabilityError(thrown)).toBe(true);
  });

  it("a MockLanguageModelV3 given only doGenerate: this copy's loop falls back to generate and completes", async () => {
    const mock = new MockLanguageModelV3({ doGenerate: textResult("from generate") });
    const loop = agentLoop$({ id: "copies", model: other.fromAiSdk(mock), tools: {} });
    const journal = jsonJournal();
    const out = await loop.run({ runId: "copies-1", journal, input: "hi" });
    expect(out.content).toBe("from generate");
    expect(mock.doGenerateCalls).toHaveLength(1);
  });
});

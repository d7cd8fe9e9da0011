import { APICallError } from "@ai-sdk/provider";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, it } from "vitest";
import { fromAiSdk } from "../../src/ai-sdk/aiSdk.ts";
import {
  isModelAdapterError,
  isModelCapabilityError,
  isNotImplemented,
  ModelCapabilityError,
} from "../../src/models/errors.ts";
import type { GenerateRequest, Model } from "../../src/models/types.ts";

/** What `fromAiSdk` makes of a model that lacks a method (issue 36): a ModelCapabilityError the loop reads. */
const request = (): GenerateRequest => ({
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  signal: new AbortController().signal,
});

async function firstPart(model: Model): Promise<unknown> {
  try {
    for await (const part of (model.stream as NonNullable<Model["stream"]>)(request())) return part;
  } catch (e) {
    return e;
  }
  return undefined;
}

describe("fromAiSdk: a method the model does not have", () => {
  it('turns a doStream that throws "Not implemented" (MockLanguageModelV3 given only doGenerate) into ModelCapabilityError', async () => {
    const error = await firstPart(fromAiSdk(new MockLanguageModelV3({ doGenerate: [] })));
    expect(isModelCapabilityError(error)).toBe(true);
    expect(error).toMatchObject({ code: "modelMethodMissing", missing: ["doStream"], isRetryable: false });
    expect((error as Error).message).toBe(
      'model mock-provider/mock-model-id: doStream is not implemented (it threw "Not implemented")',
    );
    expect((error as Error).cause).toBeInstanceOf(Error);
  });

  it('turns a doGenerate that throws "Not implemented" into ModelCapabilityError', async () => {
    const error = await fromAiSdk(new MockLanguageModelV3({ doStream: [] }))
      .generate(request())
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "ModelCapabilityError", missing: ["doGenerate"] });
  });

  it("gives a model without doGenerate a generate that throws ModelCapabilityError, calling nothing", async () => {
    let called = 0;
    const model = fromAiSdk({
      specificationVersion: "v3",
      provider: "p",
      modelId: "m",
      doStream: async () => {
        called++;
        return { stream: new ReadableStream() };
      },
    });
    const error = await model.generate(request()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelCapabilityError);
    expect((error as Error).message).toBe("model p/m has no doGenerate method (it only streams)");
    expect(called).toBe(0);
  });

  it("passes on a provider's 501 as it is: an HTTP answer, not a missing method", async () => {
    const notImplemented = new APICallError({
      message: "Not implemented",
      url: "https://api.example/v1/chat",
      requestBodyValues: {},
      statusCode: 501,
      isRetryable: false,
    });
    const model = fromAiSdk(
      new MockLanguageModelV3({
        doStream: async () => {
          throw notImplemented;
        },
      }),
    );
    expect(await firstPart(model)).toBe(notImplemented);
  });

  it("refuses a model that has only doStream when { stream: false } turns it off", () => {
    let thrown: unknown;
    try {
      fromAiSdk(
        { specificationVersion: "v3", provider: "p", modelId: "m", doStream: async () => ({}) },
        { stream: false },
      );
    } catch (e) {
      thrown = e;
    }
    expect(isModelAdapterError(thrown)).toBe(true);
    expect(thrown).toMatchObject({ code: "unsupportedModel", message: expect.stringMatching(/drop stream: false/) });
  });
});

describe("isNotImplemented", () => {
  it.each([
    ["MockLanguageModelV3's error", new Error("Not implemented"), true],
    ["a trailing period, another case", new Error("not implemented."), true],
    ["a NotImplementedError", Object.assign(new Error("no streaming here"), { name: "NotImplementedError" }), true],
    ["an HTTP 501", Object.assign(new Error("Not implemented"), { statusCode: 501 }), false],
    ["a longer message", new Error("Not implemented for this region"), false],
    ["a string", "Not implemented", false],
  ])("%s → %s", (_, error, expected) => {
    expect(isNotImplemented(error)).toBe(expected);
  });
});

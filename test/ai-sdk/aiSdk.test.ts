import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type {
  LanguageModelV2,
  LanguageModelV2Prompt,
  LanguageModelV3Content,
  LanguageModelV3GenerateResult,
  LanguageModelV3Prompt,
  LanguageModelV3Usage,
} from "@ai-sdk/provider";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, it } from "vitest";
import { type AiSdkLanguageModel, fromAiSdk, isInvalidToolInput } from "../../src/ai-sdk/aiSdk.ts";
import { toAiSdkPrompt } from "../../src/ai-sdk/aiSdkPrompt.ts";
import type { Message } from "../../src/events/types.ts";
import { isModelAdapterError, ModelAdapterError } from "../../src/models/errors.ts";
import type { GenerateRequest, ToolDescriptor } from "../../src/models/types.ts";

const usageV3 = (input: number, output: number): LanguageModelV3Usage => ({
  inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: output, reasoning: undefined },
});

const resultV3 = (
  content: LanguageModelV3Content[],
  extra: Partial<LanguageModelV3GenerateResult> = {},
): LanguageModelV3GenerateResult => ({
  content,
  finishReason: { unified: "stop", raw: "stop" },
  usage: usageV3(10, 5),
  warnings: [],
  ...extra,
});

const request = (messages: readonly Message[], tools: readonly ToolDescriptor[] = []): GenerateRequest => ({
  messages,
  tools,
  signal: new AbortController().signal,
});

const conversation: readonly Message[] = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Weather in Paris and Oslo?" },
  {
    role: "assistant",
    content: "Checking.",
    toolCalls: [
      { id: "c1", name: "weather", input: { city: "Paris" } },
      { id: "c2", name: "weather", input: { city: "Oslo" } },
      { id: "c3", name: "delete_all", input: {} },
      { id: "c4", name: "lookup", input: "nope" },
      { id: "c5", name: "weather", input: { __loomInvalidInput: "{city:", error: "Unexpected token" } },
    ],
  },
  { role: "tool", toolCallId: "c1", toolName: "weather", output: { celsius: 21 }, isError: false },
  { role: "tool", toolCallId: "c2", toolName: "weather", output: "service down", isError: true },
  {
    role: "tool",
    toolCallId: "c3",
    toolName: "delete_all",
    output: { error: "approval-declined", message: "the user said no" },
    isError: true,
  },
  { role: "tool", toolCallId: "c4", toolName: "lookup", output: { error: "unknown tool lookup" }, isError: true },
  { role: "tool", toolCallId: "c5", toolName: "weather", output: "the input is not valid JSON", isError: true },
  { role: "assistant", toolCalls: [] },
  { role: "user", content: "Thanks" },
];

describe("fromAiSdk: the prompt", () => {
  it("maps every message kind and every tool-result output (v3)", async () => {
    const model = new MockLanguageModelV3({ doGenerate: resultV3([{ type: "text", text: "ok" }]) });
    await fromAiSdk(model).generate(request(conversation));
    const prompt = model.doGenerateCalls[0]!.prompt;
    const typed: LanguageModelV3Prompt = toAiSdkPrompt(conversation, "v3"); // the structural types fit v3's
    expect(prompt).toEqual(typed);
    expect(prompt).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: [{ type: "text", text: "Weather in Paris and Oslo?" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Checking." },
          { type: "tool-call", toolCallId: "c1", toolName: "weather", input: { city: "Paris" } },
          { type: "tool-call", toolCallId: "c2", toolName: "weather", input: { city: "Oslo" } },
          { type: "tool-call", toolCallId: "c3", toolName: "delete_all", input: {} },
          { type: "tool-call", toolCallId: "c4", toolName: "lookup", input: "nope" },
          // malformed JSON text is replayed as {}: its error is in the tool result
          { type: "tool-call", toolCallId: "c5", toolName: "weather", input: {} },
        ],
      },
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: "c1",
            toolName: "weather",
            output: { type: "json", value: { celsius: 21 } },
          },
          {
            type: "tool-result",
            toolCallId: "c2",
            toolName: "weather",
            output: { type: "error-text", value: "service down" },
          },
          {
            type: "tool-result",
            toolCallId: "c3",
            toolName: "delete_all",
            output: { type: "execution-denied", reason: "the user said no" },
          },
          {
            type: "tool-result",
            toolCallId: "c4",
            toolName: "lookup",
            output: { type: "error-json", value: { error: "unknown tool lookup" } },
          },
          {
            type: "tool-result",
            toolCallId: "c5",
            toolName: "weather",
            output: { type: "error-text", value: "the input is not valid JSON" },
          },
        ],
      },
      { role: "user", content: [{ type: "text", text: "Thanks" }] },
    ]);
  });

  it("feeds a declined approval as error-json to a v2 model, which has no execution-denied", () => {
    const declined = { error: "approval-declined", message: "no" };
    const prompt: LanguageModelV2Prompt = toAiSdkPrompt(
      [{ role: "tool", toolCallId: "c1", toolName: "rm", output: declined, isError: true }],
      "v2",
    ) as LanguageModelV2Prompt;
    expect(prompt).toEqual([
      {
        role: "tool",
        content: [
          { type: "tool-result", toolCallId: "c1", toolName: "rm", output: { type: "error-json", value: declined } },
        ],
      },
    ]);
  });

  it("gives execution-denied without a reason when the declined output carries none", () => {
    const prompt = toAiSdkPrompt(
      [{ role: "tool", toolCallId: "c1", toolName: "rm", output: { error: "approval-declined" }, isError: true }],
      "v4",
    );
    expect(prompt[0]).toEqual({
      role: "tool",
      content: [{ type: "tool-result", toolCallId: "c1", toolName: "rm", output: { type: "execution-denied" } }],
    });
  });

  it("feeds outputs as JSON values: undefined → null, Date → its string", () => {
    const at = new Date("2026-01-02T03:04:05.000Z");
    const prompt = toAiSdkPrompt(
      [
        { role: "tool", toolCallId: "a", toolName: "t", output: undefined, isError: false },
        { role: "tool", toolCallId: "b", toolName: "t", output: { at, skip: undefined }, isError: false },
      ],
      "v3",
    );
    expect(prompt[0]?.content).toEqual([
      { type: "tool-result", toolCallId: "a", toolName: "t", output: { type: "json", value: null } },
      {
        type: "tool-result",
        toolCallId: "b",
        toolName: "t",
        output: { type: "json", value: { at: at.toISOString() } },
      },
    ]);
  });
});

describe("fromAiSdk: tools and call options", () => {
  it("maps tools to function tools, with { type: 'object' } when a tool has no schema", async () => {
    const model = new MockLanguageModelV3({ doGenerate: resultV3([]) });
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
    await fromAiSdk(model).generate(
      request(
        [{ role: "user", content: "hi" }],
        [
          { name: "weather", description: "Weather in a city", inputSchema: schema },
          { name: "now", description: "The time" },
          { name: "later", description: "Schema still computing", inputSchema: Promise.resolve({ type: "null" }) },
        ],
      ),
    );
    expect(model.doGenerateCalls[0]!.tools).toEqual([
      { type: "function", name: "weather", description: "Weather in a city", inputSchema: schema },
      { type: "function", name: "now", description: "The time", inputSchema: { type: "object" } },
      { type: "function", name: "later", description: "Schema still computing", inputSchema: { type: "null" } },
    ]);
  });

  it("passes no tools option when there are no tools, and call settings as given", async () => {
    const model = new MockLanguageModelV3({ doGenerate: resultV3([]) });
    await fromAiSdk(model, {
      temperature: 0,
      maxOutputTokens: 64,
      providerOptions: { openai: { user: "u1" } },
    }).generate(request([{ role: "user", content: "hi" }]));
    const call = model.doGenerateCalls[0]!;
    expect(call).not.toHaveProperty("tools");
    expect(call).toMatchObject({ temperature: 0, maxOutputTokens: 64, providerOptions: { openai: { user: "u1" } } });
  });

  it("passes the request's abort signal to doGenerate", async () => {
    const controller = new AbortController();
    const model = new MockLanguageModelV3({
      doGenerate: async ({ abortSignal }) => {
        controller.abort();
        expect(abortSignal?.aborted).toBe(true);
        return resultV3([]);
      },
    });
    await fromAiSdk(model).generate({
      messages: [{ role: "user", content: "hi" }],
      tools: [],
      signal: controller.signal,
    });
    expect(model.doGenerateCalls[0]!.abortSignal).toBe(controller.signal);
  });
});

describe("fromAiSdk: the response", () => {
  it("joins text parts into content and turns tool-call parts into tool calls", async () => {
    const model = new MockLanguageModelV3({
      doGenerate: resultV3(
        [
          { type: "reasoning", text: "thinking…" },
          { type: "text", text: "Let me " },
          { type: "tool-call", toolCallId: "call-1", toolName: "weather", input: '{"city":"Paris"}' },
          { type: "text", text: "check." },
          { type: "tool-call", toolCallId: "call-2", toolName: "now", input: "" },
          { type: "tool-call", toolCallId: "call-3", toolName: "web_search", input: "{}", providerExecuted: true },
          { type: "tool-result", toolCallId: "call-3", toolName: "web_search", result: { hits: 0 } },
        ],
        { finishReason: { unified: "tool-calls", raw: "tool_use" } },
      ),
    });
    const response = await fromAiSdk(model).generate(request([{ role: "user", content: "hi" }]));
    expect(response).toEqual({
      content: "Let me check.",
      toolCalls: [
        { id: "call-1", name: "weather", input: { city: "Paris" } },
        { id: "call-2", name: "now", input: {} },
      ],
      usage: { inputTokens: 10, outputTokens: 5 },
      finishReason: "tool-calls",
    });
  });

  it("keeps a tool call whose input is malformed JSON, with a marker instead of a throw", async () => {
    const model = new MockLanguageModelV3({
      doGenerate: resultV3([{ type: "tool-call", toolCallId: "c1", toolName: "weather", input: '{"city": Paris}' }]),
    });
    const response = await fromAiSdk(model).generate(request([{ role: "user", content: "hi" }]));
    expect(response.content).toBeUndefined();
    const input = response.toolCalls[0]?.input;
    expect(isInvalidToolInput(input)).toBe(true);
    expect(input).toEqual({ __loomInvalidInput: '{"city": Paris}', error: expect.stringMatching(/JSON/) });
    expect(JSON.parse(JSON.stringify(input))).toEqual(input); // journalable as is
    expect(isInvalidToolInput({ city: "Paris" })).toBe(false);
    expect(isInvalidToolInput(null)).toBe(false);
  });

  it("reads v2 usage (numbers) and finish reason (a string)", async () => {
    const v2: LanguageModelV2 = {
      specificationVersion: "v2",
      provider: "hand",
      modelId: "written",
      supportedUrls: {},
      doGenerate: async () => ({
        content: [{ type: "text", text: "hello" }],
        finishReason: "length",
        usage: { inputTokens: 7, outputTokens: 3, totalTokens: 10 },
        warnings: [],
      }),
      doStream: async () => {
        throw new Error("not used");
      },
    };
    const response = await fromAiSdk(v2).generate(request([{ role: "user", content: "hi" }]));
    expect(response).toEqual({
      content: "hello",
      toolCalls: [],
      usage: { inputTokens: 7, outputTokens: 3 },
      finishReason: "length",
    });
  });

  it("reads v3 usage (objects with a total) and leaves out counts the provider did not give", async () => {
    const usage: LanguageModelV3Usage = {
      inputTokens: { total: 12, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: undefined, text: undefined, reasoning: undefined },
    };
    const model = new MockLanguageModelV3({ doGenerate: resultV3([{ type: "text", text: "x" }], { usage }) });
    const response = await fromAiSdk(model).generate(request([{ role: "user", content: "hi" }]));
    expect(response.usage).toEqual({ inputTokens: 12 });
    expect(response.finishReason).toBe("stop");
  });

  it("takes a v4-shaped model", async () => {
    const model = {
      specificationVersion: "v4" as const,
      doGenerate: async () => resultV3([{ type: "text", text: "v4" }]),
    };
    expect((await fromAiSdk(model).generate(request([{ role: "user", content: "hi" }]))).content).toBe("v4");
  });

  it("throws invalidModelResponse when doGenerate does not resolve to a result", async () => {
    const model = {
      specificationVersion: "v3" as const,
      modelId: "odd",
      doGenerate: async () => ({ text: "v1 style" }),
    };
    const error = await fromAiSdk(model)
      .generate(request([{ role: "user", content: "hi" }]))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelAdapterError);
    expect(error).toMatchObject({ code: "invalidModelResponse", message: expect.stringContaining("model odd") });
  });
});

describe("fromAiSdk: what it refuses", () => {
  const wrong: Array<[string, unknown, RegExp]> = [
    ["a model id string", "openai/gpt-4o", /model id "openai\/gpt-4o"/],
    ["null", null, /got null/],
    ["a v1 model", { specificationVersion: "v1", doGenerate: async () => ({}) }, /"v1".*upgrade the provider/],
    ["an unknown version", { specificationVersion: "v9", doGenerate: async () => ({}) }, /"v9"/],
    [
      "neither doGenerate nor doStream",
      { specificationVersion: "v3", provider: "p", modelId: "m" },
      /p\/m .* neither a doGenerate nor a doStream/,
    ],
  ];
  it.each(wrong)("throws ModelAdapterError unsupportedModel for %s", (_, model, message) => {
    let thrown: unknown;
    try {
      fromAiSdk(model as AiSdkLanguageModel);
    } catch (e) {
      thrown = e;
    }
    expect(isModelAdapterError(thrown)).toBe(true);
    expect(thrown).toMatchObject({
      name: "ModelAdapterError",
      code: "unsupportedModel",
      message: expect.stringMatching(message),
    });
  });
});

describe("loom-agent/ai-sdk stays optional", () => {
  const sources = [
    ...readdirSync(new URL("../../src/ai-sdk/", import.meta.url)).map((f) => `src/ai-sdk/${f}`),
    "src/models/errors.ts",
    "src/events/invalidInput.ts",
    "src/ai-sdk.ts",
  ];

  it("imports ai and @ai-sdk/* only as types", () => {
    for (const path of sources) {
      const source = readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");
      expect(source, path).not.toMatch(/^\s*(import|export)\s+(?!type\b)[^;]*?from\s+"(ai|@ai-sdk\/[^"]+)(\/[^"]*)?"/m);
      expect(source, path).not.toMatch(/(import|require)\(\s*["'](ai|@ai-sdk)/);
    }
  });

  it("loads no ai or @ai-sdk/* module when loom/ai-sdk is imported and used", () => {
    // A resolve hook that refuses the AI SDK's packages: the child fails if anything asks for one.
    const hook = `export async function resolve(s, c, next) {
      if (s === "ai" || s.startsWith("ai/") || s.startsWith("@ai-sdk/")) throw new Error("loaded " + s);
      return next(s, c);
    }`;
    const script = `
      import { register } from "node:module";
      register("data:text/javascript," + encodeURIComponent(${JSON.stringify(hook)}));
      const m = await import("./src/ai-sdk.ts");
      const model = m.fromAiSdk({ specificationVersion: "v3", doGenerate: async () => ({ content: [{ type: "text", text: "ok" }] }) });
      const r = await model.generate({ messages: [{ role: "user", content: "hi" }], tools: [], signal: new AbortController().signal });
      if (r.content !== "ok") throw new Error("unexpected " + JSON.stringify(r));
      console.log("clean");`;
    const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      encoding: "utf8",
    });
    expect(out.trim()).toBe("clean");
  });
});

import { dynamicTool, jsonSchema, tool } from "ai";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { fromAiSdkTool, fromAiSdkTools } from "../../src/ai-sdk/aiSdkTools.ts";
import { idempotencyKey } from "../../src/events/ids.ts";
import { isModelAdapterError } from "../../src/models/errors.ts";
import type { ToolContext } from "../../src/tools/spi.ts";
import { waitContext } from "../../src/tools/wait.ts";

const context = (stepId = "support#turn:0:tool:0", runId = "order-1042"): ToolContext => ({
  idempotencyKey: idempotencyKey(runId, stepId),
  stepId,
  runId,
  signal: new AbortController().signal,
  ...waitContext(runId, stepId, Date.now),
});

const weatherSchema = z.object({ city: z.string().min(2), days: z.number().int().positive().default(1) });

describe("fromAiSdkTool with a zod schema", () => {
  const execute = vi.fn(async ({ city, days }: { city: string; days: number }) => ({ city, days, celsius: 21 }));
  const weather = fromAiSdkTool(tool({ description: "The weather in a city", inputSchema: weatherSchema, execute }));

  it("keeps the description and tells the model the schema as JSON Schema", () => {
    expect(weather.description).toBe("The weather in a city");
    expect(weather.inputSchema).toMatchObject({
      type: "object",
      properties: { city: { type: "string", minLength: 2 }, days: { type: "integer" } },
      required: ["city"],
    });
  });

  it("accepts a valid input (with the schema's defaults) and runs execute with the idempotency key as toolCallId", async () => {
    const check = await weather.validateInput!({ city: "Paris" });
    expect(check).toEqual({ ok: true, value: { city: "Paris", days: 1 } });
    const ctx = context("support#turn:2:tool:1");
    const output = await weather.execute(check.ok ? check.value : undefined, ctx);
    expect(output).toEqual({ city: "Paris", days: 1, celsius: 21 });
    // Unique to the run and the step (a step id is the same in every run), as a provider's call id is.
    expect(execute).toHaveBeenCalledWith(
      { city: "Paris", days: 1 },
      { toolCallId: idempotencyKey("order-1042", "support#turn:2:tool:1"), messages: [], abortSignal: ctx.signal },
    );
  });

  it("rejects an invalid input with zod's messages, each with its path", async () => {
    const check = await weather.validateInput!({ city: 7, days: -1 });
    expect(check.ok).toBe(false);
    const expected = weatherSchema
      .safeParse({ city: 7, days: -1 })
      .error!.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    expect(check).toEqual({ ok: false, message: expected.join("; ") });
    expect(expected).toHaveLength(2);
  });

  it("rejects the marker of a tool call whose input was not JSON, with the parse error", async () => {
    const loose = fromAiSdkTool(tool({ inputSchema: z.object({}), execute: async () => "ran" }));
    const check = await loose.validateInput!({ __loomInvalidInput: "{city:", error: "Unexpected token c" });
    expect(check).toEqual({ ok: false, message: "the input is not valid JSON: Unexpected token c" });
  });
});

describe("fromAiSdkTool with other schemas", () => {
  it("takes an AI SDK jsonSchema(…) with its validate", async () => {
    const t = fromAiSdkTool(
      tool({
        description: "echo",
        inputSchema: jsonSchema<{ text: string }>(
          { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
          {
            validate: (value) =>
              typeof (value as { text?: unknown }).text === "string"
                ? { success: true, value: value as { text: string } }
                : { success: false, error: new Error("text must be a string") },
          },
        ),
        execute: async ({ text }) => text,
      }),
    );
    expect(t.inputSchema).toEqual({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });
    expect(await t.validateInput!({ text: "hi" })).toEqual({ ok: true, value: { text: "hi" } });
    expect(await t.validateInput!({ text: 1 })).toEqual({ ok: false, message: "text must be a string" });
  });

  it("takes a jsonSchema(…) without validate: every input passes as is", async () => {
    const t = fromAiSdkTool(
      dynamicTool({ inputSchema: jsonSchema({ type: "object" }), execute: async (input) => input }),
    );
    expect(await t.validateInput!({ anything: 1 })).toEqual({ ok: true, value: { anything: 1 } });
  });

  it("takes any Standard Schema that converts to JSON Schema", async () => {
    const standard = {
      "~standard": {
        version: 1,
        vendor: "hand",
        validate: (value: unknown) =>
          typeof value === "number" ? { value } : { issues: [{ message: "expected a number", path: [{ key: "n" }] }] },
        jsonSchema: { input: ({ target }: { target: string }) => ({ type: "number", $comment: target }) },
      },
    };
    const t = fromAiSdkTool({ inputSchema: standard, execute: async (n: number) => n * 2 });
    expect(t.description).toBe("");
    expect(t.inputSchema).toEqual({ type: "number", $comment: "draft-07" });
    expect(await t.validateInput!(2)).toEqual({ ok: true, value: 2 });
    expect(await t.validateInput!("2")).toEqual({ ok: false, message: "n: expected a number" });
  });

  it("refuses a Standard Schema with no JSON Schema form, saying how to fix it", () => {
    const opaque = { "~standard": { version: 1, vendor: "zod", validate: (value: unknown) => ({ value }) } };
    expect(() => fromAiSdkTools({ legacy: { inputSchema: opaque, execute: async () => null } })).toThrow(
      expect.objectContaining({ code: "unsupportedSchema", message: expect.stringMatching(/legacy.*zodSchema/) }),
    );
  });

  it("reports a validator that throws as a rejected input, not a crash", async () => {
    const t = fromAiSdkTool({
      inputSchema: jsonSchema(
        { type: "object" },
        {
          validate: () => {
            throw new Error("boom");
          },
        },
      ),
      execute: async () => null,
    });
    expect(await t.validateInput!({})).toEqual({ ok: false, message: "the input schema threw: boom" });
  });
});

describe("fromAiSdkTool: execution and approval", () => {
  it("resolves a streaming execute to its last value", async () => {
    const t = fromAiSdkTool(
      tool({
        inputSchema: z.object({}),
        async *execute() {
          yield { status: "loading" as const };
          yield { status: "done" as const };
        },
      }),
    );
    expect(await t.execute({}, context())).toEqual({ status: "done" });
  });

  it("asks for approval when the tool needs it; a needsApproval function becomes its approval policy", async () => {
    const base = { inputSchema: z.object({ euros: z.number() }), execute: async () => null };
    expect(fromAiSdkTool(tool({ ...base, needsApproval: true })).requiresApproval).toBe(true);
    expect(fromAiSdkTool(tool(base)).requiresApproval).toBeUndefined();
    const seen: unknown[] = [];
    const policy = fromAiSdkTool(
      tool({
        ...base,
        needsApproval: async ({ euros }, options) => {
          seen.push(options.toolCallId);
          return euros > 20;
        },
      }),
    ).approval;
    const call = { runId: "r", stepId: "l#turn:0:tool:0", toolName: "refund" };
    expect(await policy?.({ ...call, input: { euros: 100 } })).toBe("ask");
    expect(await policy?.({ ...call, input: { euros: 5 } })).toBe("allow");
    expect(seen).toEqual([idempotencyKey("r", "l#turn:0:tool:0"), idempotencyKey("r", "l#turn:0:tool:0")]);
  });

  it("refuses a tool without execute and a provider tool", () => {
    const refused = [
      () => fromAiSdkTools({ client: tool({ inputSchema: z.object({}), outputSchema: z.string() }) }),
      () => fromAiSdkTools({ search: { type: "provider", inputSchema: z.object({}), execute: async () => null } }),
    ];
    for (const adapt of refused) {
      let thrown: unknown;
      try {
        adapt();
      } catch (e) {
        thrown = e;
      }
      expect(isModelAdapterError(thrown) && thrown.code).toBe("unsupportedTool");
    }
  });

  it("adapts a record of tools, keyed alike", () => {
    const tools = fromAiSdkTools({
      a: tool({ description: "A", inputSchema: z.object({}), execute: async () => 1 }),
      b: tool({ description: "B", inputSchema: z.object({}), execute: async () => 2 }),
    });
    expect(Object.keys(tools)).toEqual(["a", "b"]);
    expect(tools.b?.description).toBe("B");
  });
});

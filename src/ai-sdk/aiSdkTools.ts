/**
 * `fromAiSdkTool`: tools made with the AI SDK's `tool({ description, inputSchema, execute })` as
 * Loom tools. Structural: nothing here loads `ai` (an optional peer).
 */

import { idempotencyKey } from "../events/ids.ts";
import { isInvalidToolInput } from "../events/invalidInput.ts";
import { ModelAdapterError } from "../models/errors.ts";
import type { ApprovalPolicy } from "../policies/approval.ts";
import type { InputCheck, Tool, ToolContext } from "../tools/spi.ts";

/** What the AI SDK gives a tool's `execute` besides the input. */
export interface AiSdkToolExecutionOptions {
  readonly toolCallId: string;
  readonly messages: never[];
  readonly abortSignal?: AbortSignal;
}

/**
 * The shape of an AI SDK tool that `fromAiSdkTool` takes (`tool(…)` or `dynamicTool(…)` from
 * `ai`). `inputSchema`: a zod 4 schema, any Standard Schema that converts to JSON Schema
 * (`~standard.jsonSchema`), an AI SDK `Schema` (`jsonSchema(…)`, `zodSchema(…)`) or a lazy one.
 */
export interface AiSdkTool {
  /** `"function"` or `"dynamic"`; provider tools (`"provider"`, `"provider-defined"`) are refused. */
  readonly type?: string;
  readonly description?: string;
  readonly inputSchema?: unknown;
  /** Runs the tool (a tool without it is refused). */
  execute?(input: never, options: AiSdkToolExecutionOptions): unknown;
  /** `true` or a function: Loom asks for every call (`requiresApproval: true`). */
  readonly needsApproval?: boolean | ((...args: never[]) => unknown);
}

/** How `fromAiSdkTool` names the tool it converts. */
export interface FromAiSdkToolOptions {
  /** The tool's name, for error messages. */
  readonly name?: string;
}

/**
 * Turns an AI SDK tool into a Loom tool: its description; its input schema as JSON Schema;
 * `validateInput` by the schema (a rejected input gives the schema's issues as the message,
 * and a tool-call input that was not JSON is rejected with the parse error); `execute` called
 * with `{ toolCallId: idempotencyKey, messages: [], abortSignal }` (`ToolContext.idempotencyKey`:
 * unique to the run and the step, as a provider's call id is, and the same on every attempt and
 * resume, so the tool can hand it to a service as its idempotency key; a streaming `execute`
 * resolves to its last value). `needsApproval: true` → `requiresApproval: true`; a `needsApproval`
 * function becomes the tool's approval policy (`Tool.approval`), asked with the call's input and
 * `{ toolCallId: idempotencyKey, messages: [] }`: true asks a person, false runs the call (its
 * allow journaled `by: "policy"`).
 *
 * @throws ModelAdapterError `unsupportedTool` for a provider tool or one without `execute`;
 *   `unsupportedSchema` for a schema with no JSON Schema form (e.g. zod 3: wrap it in `zodSchema`).
 * @example
 * ```ts
 * import { tool } from "ai";
 * import { z } from "zod";
 *
 * const weather = fromAiSdkTool(
 *   tool({
 *     description: "The weather in a city",
 *     inputSchema: z.object({ city: z.string() }),
 *     execute: async ({ city }) => ({ city, celsius: 21 }),
 *   }),
 * );
 * ```
 */
export function fromAiSdkTool(tool: AiSdkTool, options: FromAiSdkToolOptions = {}): Tool {
  const label = options.name === undefined ? "fromAiSdkTool" : `fromAiSdkTool(${options.name})`;
  if (tool.type === "provider" || tool.type === "provider-defined") {
    throw new ModelAdapterError(
      "unsupportedTool",
      `${label}: a provider tool runs at (or is defined by) the provider; Loom runs its tools itself. Use a function tool.`,
    );
  }
  const execute = tool.execute;
  if (typeof execute !== "function") {
    throw new ModelAdapterError(
      "unsupportedTool",
      `${label}: the tool has no execute function; Loom runs tools itself, so give it one.`,
    );
  }
  const schema = resolveSchema(tool.inputSchema, label);
  return {
    description: tool.description ?? "",
    inputSchema: schema.jsonSchema,
    async validateInput(input: unknown): Promise<InputCheck> {
      if (isInvalidToolInput(input)) return { ok: false, message: `the input is not valid JSON: ${input.error}` };
      try {
        return await schema.validate(input);
      } catch (e) {
        return { ok: false, message: `the input schema threw: ${e instanceof Error ? e.message : String(e)}` };
      }
    },
    async execute(input: unknown, { idempotencyKey, signal }: ToolContext): Promise<unknown> {
      const output: unknown = execute.call(tool, input as never, {
        toolCallId: idempotencyKey,
        messages: [],
        abortSignal: signal,
      });
      return lastValue(output);
    },
    ...(tool.needsApproval === true ? { requiresApproval: true } : {}),
    ...(typeof tool.needsApproval === "function"
      ? { requiresApproval: true, approval: needsApprovalPolicy(tool.needsApproval) }
      : {}),
  };
}

/** An AI SDK `needsApproval` function as a Loom approval policy: true asks a person, false allows the call. */
function needsApprovalPolicy(needsApproval: (...args: never[]) => unknown): ApprovalPolicy {
  const ask = needsApproval as (input: unknown, options: { toolCallId: string; messages: never[] }) => unknown;
  return async ({ runId, stepId, input }) =>
    (await ask(input, { toolCallId: idempotencyKey(runId, stepId), messages: [] })) ? "ask" : "allow";
}

/**
 * `fromAiSdkTool` for each tool of a record (the `tools` of `generateText`), keyed alike.
 *
 * @example
 * ```ts
 * const loop = agentLoop$({ id: "support", model, tools: fromAiSdkTools({ weather, search }) });
 * ```
 */
export function fromAiSdkTools(tools: Readonly<Record<string, AiSdkTool>>): Record<string, Tool> {
  // fromEntries defines own keys: a tool named "__proto__" stays a tool, not the record's prototype.
  return Object.fromEntries(Object.entries(tools).map(([name, tool]) => [name, fromAiSdkTool(tool, { name })]));
}

interface ResolvedSchema {
  /** JSON Schema, or a PromiseLike of it (an AI SDK `jsonSchema(promise)`); `toAiSdkTools` awaits it. */
  readonly jsonSchema: unknown;
  validate(input: unknown): Promise<InputCheck>;
}

/** The AI SDK marks its `Schema` objects with this symbol (`Symbol.for`, so any copy of `ai` agrees). */
const AI_SDK_SCHEMA = Symbol.for("vercel.ai.schema");

interface StandardSchemaProps {
  readonly vendor?: string;
  validate(value: unknown): StandardResult | PromiseLike<StandardResult>;
  readonly jsonSchema?: { input(options: { target: string }): unknown };
}
type StandardResult = { readonly value: unknown; readonly issues?: undefined } | { readonly issues: readonly Issue[] };
interface Issue {
  readonly message: string;
  readonly path?: readonly (PropertyKey | { readonly key: PropertyKey })[];
}

function resolveSchema(schema: unknown, label: string, depth = 0): ResolvedSchema {
  if (schema === undefined || schema === null) {
    return { jsonSchema: { type: "object", properties: {} }, validate: async (value) => ({ ok: true, value }) };
  }
  if (typeof schema === "object" && AI_SDK_SCHEMA in schema) {
    const s = schema as unknown as { jsonSchema: unknown; validate?: (value: unknown) => unknown };
    return {
      jsonSchema: s.jsonSchema,
      async validate(value) {
        if (typeof s.validate !== "function") return { ok: true, value };
        const result = (await s.validate(value)) as { success: boolean; value?: unknown; error?: unknown };
        return result.success ? { ok: true, value: result.value } : { ok: false, message: errorMessage(result.error) };
      },
    };
  }
  if (typeof schema === "object" && "~standard" in schema) {
    const standard = (schema as { "~standard": StandardSchemaProps })["~standard"];
    if (typeof standard.jsonSchema?.input !== "function") {
      throw new ModelAdapterError(
        "unsupportedSchema",
        `${label}: this ${standard.vendor ?? "Standard Schema"} schema has no JSON Schema form to tell the model (no ~standard.jsonSchema). Wrap it with zodSchema(schema) (zod 3) or jsonSchema(<JSON Schema>, { validate }) from "ai".`,
      );
    }
    return {
      jsonSchema: standard.jsonSchema.input({ target: "draft-07" }),
      async validate(value) {
        const result = await standard.validate(value);
        return result.issues === undefined
          ? { ok: true, value: result.value }
          : { ok: false, message: issuesMessage(result.issues) };
      },
    };
  }
  // A lazy schema (`lazySchema(() => …)`) is a function returning the schema.
  if (typeof schema === "function" && depth === 0) return resolveSchema((schema as () => unknown)(), label, 1);
  throw new ModelAdapterError(
    "unsupportedSchema",
    `${label}: the inputSchema is neither a zod/Standard Schema nor an AI SDK Schema. Use a zod schema, or jsonSchema(<JSON Schema>) from "ai".`,
  );
}

/** An AI SDK validation error: its issues when it carries them (ZodError, TypeValidationError), else its message. */
function errorMessage(error: unknown): string {
  if (typeof error === "object" && error !== null) {
    const { issues, cause } = error as { issues?: unknown; cause?: unknown };
    if (isIssueList(issues)) return issuesMessage(issues);
    if (isIssueList(cause)) return issuesMessage(cause);
    if (error instanceof Error) return error.message;
  }
  return String(error);
}

function isIssueList(x: unknown): x is readonly Issue[] {
  return Array.isArray(x) && x.length > 0 && x.every((i) => typeof (i as { message?: unknown })?.message === "string");
}

/** `city: Invalid input: expected string, received number; days: Too small…` */
function issuesMessage(issues: readonly Issue[]): string {
  return issues
    .map((issue) => {
      const path = (issue.path ?? []).map((p) => String(typeof p === "object" ? p.key : p)).join(".");
      return path === "" ? issue.message : `${path}: ${issue.message}`;
    })
    .join("; ");
}

/** A streaming `execute` (an AsyncIterable of preliminary outputs) ends with its final output. */
async function lastValue(output: unknown): Promise<unknown> {
  if (typeof output === "object" && output !== null && !("then" in output) && Symbol.asyncIterator in output) {
    let last: unknown;
    for await (const value of output as AsyncIterable<unknown>) last = value;
    return last;
  }
  return output;
}

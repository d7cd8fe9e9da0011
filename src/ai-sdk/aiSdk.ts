/**
 * `fromAiSdk`: any AI SDK LanguageModel (specification v2, v3 or v4) as Loom's Model.
 * Structural: nothing here loads `ai` or `@ai-sdk/provider` (both optional peers).
 */

import { isNotImplemented, ModelAdapterError, ModelCapabilityError } from "../models/errors.ts";
import type { GenerateRequest, Model, ModelResponse } from "../models/types.ts";
import { type AiSdkSpecificationVersion, toAiSdkPrompt, toAiSdkTools } from "./aiSdkPrompt.ts";
import { fromAiSdkResult } from "./aiSdkResponse.ts";
import { aiSdkStreamParts } from "./aiSdkStream.ts";

export { type InvalidToolInput, isInvalidToolInput } from "../events/invalidInput.ts";
export type { AiSdkSpecificationVersion } from "./aiSdkPrompt.ts";

const VERSIONS: readonly string[] = ["v2", "v3", "v4"] satisfies AiSdkSpecificationVersion[];

/**
 * The shape of an AI SDK LanguageModel that `fromAiSdk` takes: `LanguageModelV2`,
 * `LanguageModelV3` or `LanguageModelV4` from `@ai-sdk/provider`, e.g. `openai("gpt-4o")` or
 * `MockLanguageModelV3` from `ai/test`.
 */
export interface AiSdkLanguageModel {
  readonly specificationVersion: AiSdkSpecificationVersion;
  readonly provider?: string;
  readonly modelId?: string;
  /**
   * Typed loosely on purpose: each specification has its own call options. A model needs
   * `doGenerate`, `doStream` or both (see `fromAiSdk`).
   */
  doGenerate?(options: never): PromiseLike<unknown>;
  /** When present, `fromAiSdk` gives the model a `stream` (unless `stream: false`), which the loop prefers. */
  doStream?(options: never): PromiseLike<unknown>;
}

/** Call settings passed to every `doGenerate` call. The adapter sets `prompt`, `tools` and `abortSignal`. */
export interface FromAiSdkOptions {
  readonly maxOutputTokens?: number;
  readonly temperature?: number;
  readonly topP?: number;
  readonly topK?: number;
  readonly presencePenalty?: number;
  readonly frequencyPenalty?: number;
  readonly stopSequences?: readonly string[];
  readonly seed?: number;
  readonly toolChoice?:
    | { readonly type: "auto" | "none" | "required" }
    | { readonly type: "tool"; readonly toolName: string };
  readonly headers?: Readonly<Record<string, string | undefined>>;
  /** Provider-specific options, by provider name (`{ openai: { … } }`). */
  readonly providerOptions?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /**
   * `false`: never call `doStream` (the Model gets no `stream`, so the loop calls `doGenerate`),
   * for a provider whose streaming is poor. Not needed for a model without a working `doStream`
   * (a `MockLanguageModelV3` given only `doGenerate`): the loop falls back by itself. Default:
   * stream when the model has `doStream`.
   */
  readonly stream?: boolean;
}

/**
 * Turns an AI SDK LanguageModel (specification v2, v3 or v4) into Loom's Model.
 *
 * The conversation becomes the prompt (system; user text; assistant text and tool-call parts;
 * tool results: `json` for an output, `error-text`/`error-json` for a failure or a refusal
 * (`isError`), `execution-denied` for a declined approval, i.e. an output
 * `{ error: "approval-declined", … }` — `error-json` on v2, which has no such output), the tools
 * become function tools, the request's signal is passed as `abortSignal`. The response's text
 * parts are joined into `content`; its tool-call parts become `toolCalls` with their JSON text
 * parsed (malformed text gives an `InvalidToolInput`, never a throw); `usage` and
 * `finishReason` are read from either specification's shape.
 *
 * The loop streams whenever the model can (docs/streaming.md): when the model has
 * `doStream`, the Model has `stream` and the loop calls it, with or without watchers; it calls
 * `doGenerate` only for a model without `doStream`, or whose `doStream` is not implemented (a
 * `MockLanguageModelV3` given only `doGenerate` throws "Not implemented": the adapter turns that
 * into `ModelCapabilityError`, and the loop calls `generate` instead). Likewise a model with only
 * `doStream` has a `generate` that throws `ModelCapabilityError` without calling anything.
 *
 * When the model has `doStream`, the Model also has `stream` (see `Model.stream`): text,
 * reasoning and tool-input deltas as they arrive, then the response, assembled from the stream's
 * parts into the shape of a `doGenerate` result and mapped as above, so it is the response
 * `doGenerate` would give for the same content. A call's tool-input deltas concatenate to its
 * input's JSON text, also for a v4 `inputEncoding: "text"` input (whose raw text is sent as the
 * JSON string's text). An `error` part, a stream cut before its
 * `finish` part, or a v4 `finish` part whose reason is `interrupted` (the provider's word for a
 * cut stream), fails the attempt (`ModelStreamError` `incompleteStream`, retryable); an error the stream throws
 * (`APICallError`…) is passed on as it is.
 *
 * @throws ModelAdapterError `unsupportedModel` when `model` is not such a model: a model id
 * string, neither `doGenerate` nor `doStream` (or no `doGenerate` with `stream: false`), or
 * another `specificationVersion` (`"v1"`: AI SDK 4 providers; a later one than `"v4"`: a newer
 * Loom is needed).
 * @example
 * ```ts
 * import { openai } from "@ai-sdk/openai";
 * import { agentLoop$ } from "loom-agent";
 * import { fromAiSdk, fromAiSdkTools } from "loom-agent/ai-sdk";
 *
 * const loop = agentLoop$({
 *   id: "support",
 *   model: fromAiSdk(openai("gpt-4o"), { temperature: 0 }),
 *   tools: fromAiSdkTools({ weather }),
 * });
 * ```
 */
export function fromAiSdk(model: AiSdkLanguageModel, options: FromAiSdkOptions = {}): Model {
  const { stream: streams = true, ...settings } = options;
  const version = checkModel(model, streams);
  const name = modelName(model);
  const callOptions = async ({ messages, tools, signal }: GenerateRequest) => {
    const functionTools = await toAiSdkTools(tools);
    return {
      ...settings,
      prompt: toAiSdkPrompt(messages, version),
      ...(functionTools.length > 0 ? { tools: functionTools } : {}),
      abortSignal: signal,
    };
  };
  const { doGenerate, doStream } = model;
  const generate = async (request: GenerateRequest): Promise<ModelResponse> => {
    if (typeof doGenerate !== "function") {
      throw new ModelCapabilityError(["doGenerate"], `${name} has no doGenerate method (it only streams)`);
    }
    const call = await callOptions(request);
    return fromAiSdkResult(await notImplemented(name, "doGenerate", () => doGenerate.call(model, call as never)), name);
  };
  const { modelId, provider } = model as { modelId?: unknown; provider?: unknown };
  const id = {
    ...(typeof modelId === "string" ? { id: modelId } : {}),
    ...(typeof provider === "string" ? { provider: providerName(provider) } : {}),
  };
  if (!streams || typeof doStream !== "function") return { ...id, generate };
  return {
    ...id,
    generate,
    stream: (request: GenerateRequest) =>
      aiSdkStreamParts(async () => {
        const call = await callOptions(request);
        return notImplemented(name, "doStream", () => doStream.call(model, call as never));
      }, name),
  };
}

/** The AI SDK's provider ids (`openai.chat`, `amazon-bedrock`…) by the GenAI conventions' provider names. */
const PROVIDER_NAMES: Readonly<Record<string, string>> = {
  "amazon-bedrock": "aws.bedrock",
  azure: "azure.ai.openai",
  "google.generative-ai": "gcp.gemini",
  "google.vertex": "gcp.vertex_ai",
  mistral: "mistral_ai",
  xai: "x_ai",
};

/**
 * The provider's name as the GenAI conventions spell it, from an AI SDK model's `provider`
 * (`openai.chat` → `openai`, `google.vertex.chat` → `gcp.vertex_ai`); another provider keeps
 * the first part of its id.
 *
 * @example
 * providerName("anthropic.messages"); // "anthropic"
 */
export function providerName(provider: string): string {
  for (const [prefix, name] of Object.entries(PROVIDER_NAMES)) {
    if (provider === prefix || provider.startsWith(`${prefix}.`)) return name;
  }
  return provider.split(".")[0] || provider;
}

/** Calls a model method; its "Not implemented" throw (see `isNotImplemented`) becomes a `ModelCapabilityError`. */
async function notImplemented(name: string, method: string, call: () => PromiseLike<unknown>): Promise<unknown> {
  try {
    return await call();
  } catch (error) {
    if (!isNotImplemented(error)) throw error;
    const message = (error as Error).message;
    throw new ModelCapabilityError([method], `${name}: ${method} is not implemented (it threw "${message}")`, {
      cause: error,
    });
  }
}

function checkModel(model: unknown, streams: boolean): AiSdkSpecificationVersion {
  if (typeof model === "string") {
    throw new ModelAdapterError(
      "unsupportedModel",
      `fromAiSdk: got the model id "${model}", not a model. Pass a LanguageModel object, e.g. openai("gpt-4o") or gateway("${model}").`,
    );
  }
  if (typeof model !== "object" || model === null) {
    throw new ModelAdapterError(
      "unsupportedModel",
      `fromAiSdk: got ${model === null ? "null" : typeof model}; pass an AI SDK LanguageModel (specificationVersion "v2", "v3" or "v4", with doGenerate or doStream).`,
    );
  }
  const { specificationVersion, doGenerate, doStream } = model as {
    specificationVersion?: unknown;
    doGenerate?: unknown;
    doStream?: unknown;
  };
  if (typeof specificationVersion !== "string" || !VERSIONS.includes(specificationVersion)) {
    const newer = typeof specificationVersion === "string" && Number(/^v(\d+)$/.exec(specificationVersion)?.[1]) > 4;
    const fix =
      specificationVersion === "v1"
        ? "upgrade the provider package to one made for AI SDK 5 or later"
        : newer
          ? 'this Loom reads specifications "v2", "v3" and "v4": upgrade loom-agent, or use a provider package of one of those'
          : 'pass an AI SDK LanguageModel of specification "v2", "v3" or "v4"';
    throw new ModelAdapterError(
      "unsupportedModel",
      `fromAiSdk: ${modelName(model)} has specificationVersion ${JSON.stringify(specificationVersion)}; ${fix}.`,
    );
  }
  if (typeof doGenerate !== "function" && (typeof doStream !== "function" || !streams)) {
    const what =
      typeof doStream === "function"
        ? "has no doGenerate method, and { stream: false } leaves nothing to call: drop stream: false"
        : "has neither a doGenerate nor a doStream method: pass the model itself, not a provider or a wrapper";
    throw new ModelAdapterError(
      "unsupportedModel",
      `fromAiSdk: ${modelName(model)} (specification ${specificationVersion}) ${what}.`,
    );
  }
  return specificationVersion as AiSdkSpecificationVersion;
}

function modelName(model: object): string {
  const { provider, modelId } = model as { provider?: unknown; modelId?: unknown };
  if (typeof provider === "string" && typeof modelId === "string") return `model ${provider}/${modelId}`;
  if (typeof modelId === "string") return `model ${modelId}`;
  return "the model";
}

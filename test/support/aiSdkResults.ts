import { APICallError, type LanguageModelV3GenerateResult } from "@ai-sdk/provider";

/** The error an AI SDK provider throws for an HTTP status (with its response headers, e.g. `retry-after`). */
export const apiCallError = (statusCode: number, headers: Record<string, string> = {}) =>
  new APICallError({
    message: `status ${statusCode}`,
    url: "https://api.example.test/v1/chat",
    requestBodyValues: {},
    statusCode,
    responseHeaders: headers,
  });

/** A v3 `doGenerate` result that answers `text` and stops. */
export const textResult = (text: string): LanguageModelV3GenerateResult => ({
  content: [{ type: "text", text }],
  finishReason: { unified: "stop", raw: undefined },
  usage: {
    inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 1, text: 1, reasoning: undefined },
  },
  warnings: [],
});

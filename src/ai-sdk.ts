/**
 * `loom-agent/ai-sdk`: take the models and tools an agent runtime already has from the AI SDK,
 * and show a run in `useChat` (`toUIMessageStream`).
 * `ai` and `@ai-sdk/provider` are optional peers; nothing here loads them.
 */
export {
  type AiSdkLanguageModel,
  type AiSdkSpecificationVersion,
  type FromAiSdkOptions,
  fromAiSdk,
} from "./ai-sdk/aiSdk.ts";
export {
  type AiSdkTool,
  type AiSdkToolExecutionOptions,
  type FromAiSdkToolOptions,
  fromAiSdkTool,
  fromAiSdkTools,
} from "./ai-sdk/aiSdkTools.ts";
export {
  type LoomUIMessageChunk,
  type ToUIMessageStreamOptions,
  type ToUIMessageStreamResponseOptions,
  toUIMessageStream,
  toUIMessageStreamResponse,
} from "./ai-sdk/uiMessageStream.ts";
export { type InvalidToolInput, isInvalidToolInput } from "./events/invalidInput.ts";
export { isModelAdapterError, ModelAdapterError, type ModelAdapterErrorCode } from "./models/errors.ts";

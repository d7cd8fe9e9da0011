/**
 * A run's events (`RunEvent`) as AI SDK UI message chunks: the one assistant message `useChat`
 * shows for a run. The chunk shapes are in uiMessageChunkTypes.ts; nothing loads `ai`.
 */
import { describeCause } from "../events/errorCause.ts";
import { approvalId, parseFrameId } from "../events/ids.ts";
import { isInvalidToolInput } from "../events/invalidInput.ts";
import type { ToolCall } from "../events/types.ts";
import type { RunEvent } from "../projections/events.ts";
import { subRunPath } from "../runtime/streaming/subRunEvents.ts";
import type { LoomUIMessageChunk, ToUIMessageStreamOptions } from "./uiMessageChunkTypes.ts";

export type { LoomUIMessageChunk, ToUIMessageStreamOptions } from "./uiMessageChunkTypes.ts";

/** The model call whose deltas are shown: the attempt seen from its `model-started` on. */
interface LiveAttempt {
  readonly stepId: string;
  readonly attempt: number;
  textId?: string;
  text: string;
  reasoningId?: string;
  /** Tool calls whose input is streaming: id → name and the text so far. */
  readonly tools: Map<string, { readonly toolName: string; input: string }>;
}

type Chunk = LoomUIMessageChunk;

/**
 * Translates a run's events into UI message chunks (see `toUIMessageStream`), ending after the
 * run's last event. Deltas show only for an attempt whose `model-started` was seen (a client that
 * joins mid-call gets that call's text whole from `model-finished`), and a call's text is sent
 * from its deltas or from `model-finished`, never both.
 */
export async function* uiMessageChunks(
  events: AsyncIterable<RunEvent>,
  options: ToUIMessageStreamOptions = {},
): AsyncGenerator<LoomUIMessageChunk> {
  let started = false;
  let step: string | undefined; // the model step whose UI step is open
  let live: LiveAttempt | undefined;
  const callsByTurn = new Map<string, readonly ToolCall[]>(); // `<loop>#<turn>` → the turn's calls
  const announced = new Set<string>(); // tool calls whose input the message has
  const denied = new Set<string>();
  // What the client was sent before (a resumed run's history): its calls known, nothing sent again.
  for (const event of options.shown ?? []) {
    if (event.type === "model-finished") {
      const parsed = parseFrameId(event.stepId);
      if (parsed !== undefined) callsByTurn.set(`${parsed.loopId}#${parsed.turn}`, event.toolCalls);
      for (const call of event.toolCalls) announced.add(call.id);
    }
  }

  function* open(runId: string): Generator<Chunk> {
    if (started) return;
    started = true;
    const messageId = options.messageId ?? runId;
    yield options.messageMetadata === undefined
      ? { type: "start", messageId }
      : { type: "start", messageId, messageMetadata: options.messageMetadata };
  }
  function* enterStep(stepId: string): Generator<Chunk> {
    if (step === stepId) return;
    if (step !== undefined) yield { type: "finish-step" };
    step = stepId;
    yield { type: "start-step" };
  }
  /** Ends what the live attempt has open; `void` also fails its streaming tool inputs. */
  function* closeLive(voided: boolean): Generator<Chunk> {
    if (live === undefined) return;
    if (live.textId !== undefined) yield { type: "text-end", id: live.textId };
    if (live.reasoningId !== undefined) yield { type: "reasoning-end", id: live.reasoningId };
    if (voided) {
      for (const [toolCallId, { toolName, input }] of live.tools) {
        const errorText = "the model call was tried again; this input is void";
        yield { type: "tool-input-error", toolCallId, toolName, input, errorText };
      }
    }
    live = undefined;
  }
  /** The model's call behind a tool step, from the turn's `model-finished` (else the step id stands in). */
  function callOf(stepId: string, toolName: string): { toolCallId: string; toolName: string } {
    const parsed = parseFrameId(stepId);
    const call =
      parsed?.kind === "tool" ? callsByTurn.get(`${parsed.loopId}#${parsed.turn}`)?.[parsed.index] : undefined;
    return call === undefined ? { toolCallId: stepId, toolName } : { toolCallId: call.id, toolName: call.name };
  }
  function* announce(call: { toolCallId: string; toolName: string }, input: unknown): Generator<Chunk> {
    if (announced.has(call.toolCallId)) return;
    announced.add(call.toolCallId);
    yield { type: "tool-input-available", ...call, input };
  }
  function* finish(finishReason: "stop" | "tool-calls" | "error" | "other"): Generator<Chunk> {
    yield* closeLive(false);
    if (step !== undefined) yield { type: "finish-step" };
    step = undefined;
    yield { type: "finish", finishReason };
  }
  const isLive = (e: { stepId: string; attempt: number }) => live?.stepId === e.stepId && live.attempt === e.attempt;

  function* translate(event: RunEvent): Generator<Chunk, boolean> {
    yield* open(event.runId);
    switch (event.type) {
      case "run-started":
        return false;
      case "model-started":
        yield* closeLive(true); // a new attempt: the one before failed
        yield* enterStep(event.stepId);
        live = { stepId: event.stepId, attempt: event.attempt, text: "", tools: new Map() };
        return false;
      case "text-delta":
        if (!live || !isLive(event) || event.delta === "") return false;
        if (live.textId === undefined) {
          live.textId = `${event.stepId}:${event.attempt}:text`;
          yield { type: "text-start", id: live.textId };
        }
        live.text += event.delta;
        yield { type: "text-delta", id: live.textId, delta: event.delta };
        return false;
      case "reasoning-delta":
        if (!live || !isLive(event) || event.delta === "") return false;
        if (live.reasoningId === undefined) {
          live.reasoningId = `${event.stepId}:${event.attempt}:reasoning`;
          yield { type: "reasoning-start", id: live.reasoningId };
        }
        yield { type: "reasoning-delta", id: live.reasoningId, delta: event.delta };
        return false;
      case "tool-input-delta": {
        if (!live || !isLive(event)) return false;
        const { toolCallId, toolName } = event;
        let tool = live.tools.get(toolCallId);
        if (tool === undefined) {
          tool = { toolName, input: "" };
          live.tools.set(toolCallId, tool);
          yield { type: "tool-input-start", toolCallId, toolName };
        }
        tool.input += event.delta;
        yield { type: "tool-input-delta", toolCallId, inputTextDelta: event.delta };
        return false;
      }
      case "reset":
        // A journaled reset (a resume asked the call again) is told also when its deltas were not
        // seen here: a client that reconnected here got them from the process that died.
        if (!isLive(event) && !("cursor" in event)) return false;
        if (isLive(event)) yield* closeLive(true);
        yield { type: "data-loom-reset", data: { stepId: event.stepId, attempt: event.attempt }, transient: true };
        return false;
      case "model-retrying": {
        // A failure no attempt follows (not retryable, or the policy's last attempt): the run's
        // end tells it (`error`), so only an attempt that will be retried is announced as retrying.
        if (event.retryAt === null) return false;
        const error = `${event.error.name}${event.error.status === undefined ? "" : ` (status ${event.error.status})`}: ${event.error.message}`;
        yield {
          type: "data-loom-retrying",
          data: { stepId: event.stepId, attempt: event.attempt, error, retryAt: event.retryAt },
          transient: true,
        };
        return false;
      }
      case "model-finished": {
        yield* enterStep(event.stepId);
        const content = event.content ?? "";
        const streamed = live?.stepId === event.stepId ? live : undefined;
        if (streamed?.textId !== undefined) {
          // The deltas are the content (Model.stream's contract); send what they lacked, if anything.
          if (content.startsWith(streamed.text) && content.length > streamed.text.length) {
            yield { type: "text-delta", id: streamed.textId, delta: content.slice(streamed.text.length) };
          }
        } else if (content !== "") {
          const id = `${event.stepId}:text`;
          yield { type: "text-start", id };
          yield { type: "text-delta", id, delta: content };
          yield { type: "text-end", id };
        }
        if (streamed) yield* closeLive(false);
        const parsed = parseFrameId(event.stepId);
        if (parsed !== undefined) callsByTurn.set(`${parsed.loopId}#${parsed.turn}`, event.toolCalls);
        for (const call of event.toolCalls) {
          if (announced.has(call.id)) continue;
          announced.add(call.id);
          if (isInvalidToolInput(call.input)) {
            const { __loomInvalidInput: input, error } = call.input;
            const errorText = `the input is not valid JSON: ${error}`;
            yield { type: "tool-input-error", toolCallId: call.id, toolName: call.name, input, errorText };
          } else {
            yield { type: "tool-input-available", toolCallId: call.id, toolName: call.name, input: call.input };
          }
        }
        return false;
      }
      case "tool-started":
        yield* announce(callOf(event.stepId, event.toolName), event.input);
        return false;
      case "approval-requested": {
        const call = callOf(event.stepId, event.toolName);
        yield* announce(call, event.input);
        yield { type: "tool-approval-request", approvalId: approvalId(event.stepId), toolCallId: call.toolCallId };
        return false;
      }
      case "approval-decided": {
        if (event.approved) return false; // the tool runs: its output follows
        const call = callOf(event.stepId, "");
        if (!announced.has(call.toolCallId)) return false; // nothing of it shown: nothing to deny
        denied.add(call.toolCallId);
        yield { type: "tool-output-denied", toolCallId: call.toolCallId };
        return false;
      }
      case "tool-finished": {
        const call = callOf(event.stepId, event.toolName);
        yield* announce(call, undefined);
        // Lean mode keeps no output in the event: its digest stands for it.
        const output = "output" in event ? event.output : { digest: event.digest, bytes: event.bytes };
        if (event.status === "ok") yield { type: "tool-output-available", toolCallId: call.toolCallId, output };
        else yield { type: "tool-output-error", toolCallId: call.toolCallId, errorText: errorText(output) };
        return false;
      }
      case "call-settled": {
        const call = callOf(event.stepId, event.toolName);
        if (denied.has(call.toolCallId)) return false; // already shown as denied
        yield* announce(call, undefined);
        if (event.status === "ok") {
          yield { type: "tool-output-available", toolCallId: call.toolCallId, output: { settled: event.reason } };
        } else {
          yield { type: "tool-output-error", toolCallId: call.toolCallId, errorText: event.reason };
        }
        return false;
      }
      case "run-completed":
        yield* finish("stop");
        return true;
      case "run-cancelled":
        yield* closeLive(false);
        yield { type: "abort", reason: event.reason };
        return true;
      case "run-interrupted":
        if (event.reason === "aborted") {
          yield* closeLive(false);
          yield { type: "abort", reason: "aborted" };
        } else if (event.reason === "approval-pending") {
          yield* finish("tool-calls");
        } else {
          const cause = event.cause === undefined ? "" : `: ${describeCause(event.cause)}`;
          yield { type: "error", errorText: `run ${event.runId} stopped (${event.reason})${cause}` };
          yield* finish("error");
        }
        return true;
      case "run-failed":
        yield { type: "error", errorText: `run ${event.runId} failed: ${event.error.name}: ${event.error.message}` };
        yield* finish("error");
        return true;
      default: {
        const never: never = event;
        return Boolean(never);
      }
    }
  }

  let root: string | undefined;
  try {
    for await (const event of events) {
      root ??= event.runId;
      const path = event.runId === root ? undefined : subRunPath(root, event); // a sub-agent's: its call's progress
      if (path?.[0] !== undefined) {
        const data = { toolCallId: callOf(path[0], "").toolCallId, path, event };
        yield { type: "data-loom-subagent", data, transient: true };
      } else if (yield* translate(event)) return;
    }
  } catch (error) {
    yield { type: "error", errorText: options.onError ? options.onError(error) : messageOf(error) };
    return;
  }
  if (started) yield* finish("other"); // the events ended before the run did (a signal): close the message
}

function errorText(output: unknown): string {
  if (typeof output === "string") return output;
  try {
    return JSON.stringify(output) ?? String(output);
  } catch {
    return String(output);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

import { digestOfRecorded, sha256Hex } from "../../core/digest.ts";
import { IntegrityError, isIntegrityError } from "../../core/errors.ts";
import type { ClaimCheckEnvelope } from "../../events/claimCheck.ts";
import { outcomeId } from "../../events/ids.ts";
import type { BlobStore } from "../../events/spi.ts";
import type { Message, ModelResponse, ToolCall } from "../../events/types.ts";
import type { FrameState, RunState } from "../../projections/runState.ts";

/**
 * The conversation as the journal records it, piece by piece: what the model was told after each
 * of its answers, and the chained prompt digest that model frames record. The loop (RunSession)
 * and the verifier of the CLI (`loom show`) build both from these same functions, so what one
 * writes the other checks.
 */

/** What the model was fed for one call. */
export interface Fed {
  readonly output: unknown;
  readonly isError: boolean;
}

/** The first messages of a run's conversation: the loop's system prompt, then the run's input. */
export const conversationStart = (
  config: { readonly system?: string | undefined },
  input: string | readonly Message[],
): Message[] => [
  ...(config.system === undefined ? [] : [{ role: "system" as const, content: config.system }]),
  ...(typeof input === "string" ? [{ role: "user" as const, content: input }] : input),
];

/** The message a model response adds to the conversation. */
export const assistantMessage = (response: ModelResponse): Message => ({
  role: "assistant",
  content: response.content,
  toolCalls: response.toolCalls,
});

/** The message that feeds one call's result back (`isError` true when nothing was fed). */
export const toolResultMessage = (call: ToolCall, fed: Fed | undefined): Message => ({
  role: "tool",
  toolCallId: call.id,
  toolName: call.name,
  output: fed?.output,
  isError: fed?.isError ?? true,
});

/**
 * The prompt digest of a model call: chained from the previous call's (`""` before the first)
 * and the digest of the messages added since, so hashing a run stays linear in its length.
 */
export const chainedPromptDigest = (previous: string, added: readonly Message[]): string =>
  sha256Hex(previous + (digestOfRecorded(added).digest ?? ""));

/**
 * The prompt digest of a model call sent under a context decision: the chained digest of the whole
 * conversation, and the decision that made the prompt from it (so the digest covers what was sent).
 * The chain goes on from this digest.
 */
export const contextPromptDigest = (chained: string, choice: unknown): string =>
  sha256Hex(`${chained}context:${digestOfRecorded(choice).digest ?? ""}`);

/**
 * What the model was fed for the call at `stepId`, from the folded journal: a settled call's
 * result, a failed tool's outcome decision, or a completed frame's output (an envelope the
 * runtime marked resolved through `resolve`; any other output as recorded, without a call);
 * undefined while the call has not ended.
 */
export async function fedFromState(
  state: RunState,
  stepId: string,
  resolve: (stepId: string, envelope: ClaimCheckEnvelope) => Promise<unknown>,
): Promise<Fed | undefined> {
  const settled = state.settled[stepId];
  if (settled) return { output: settled.result, isError: settled.status === "error" };
  const frame = state.frames[stepId];
  if (frame?.status === "failed") {
    const choice = state.decisions[outcomeId(stepId)]?.choice as { failed?: unknown } | undefined;
    return { output: choice?.failed, isError: true };
  }
  if (frame?.status === "completed") return { output: await resolvedOutput(frame, resolve), isError: false };
  return undefined;
}

/** A completed frame's output as fed: resolved when the runtime marked it claim-checked (sync otherwise). */
function resolvedOutput(
  frame: FrameState,
  resolve: (stepId: string, envelope: ClaimCheckEnvelope) => Promise<unknown>,
): unknown | Promise<unknown> {
  return frame.claimCheck ? resolve(frame.frameId, frame.claimCheck) : frame.output;
}

/**
 * A claim-checked output read back from `blobs` (verified by the blob store against its digest).
 * Call it only with an envelope the runtime marked (`FrameState.claimCheck`, `claimCheckOf`):
 * any other envelope-shaped output is plain data. `where` names the run and step in errors.
 */
export async function resolveClaimCheck(
  recorded: ClaimCheckEnvelope,
  blobs: BlobStore | undefined,
  where: string,
): Promise<unknown> {
  if (!blobs) {
    throw new IntegrityError(
      `${where}: its output is claim-checked (${recorded.ref}) but no blob store is configured; pass claimCheck.blobs or journal.blobs`,
      "blobMissing",
    );
  }
  let bytes: Uint8Array;
  try {
    bytes = await blobs.get(recorded.ref);
  } catch (e) {
    if (!isIntegrityError(e)) throw e;
    throw new IntegrityError(`${where}: ${e.message}`, e.code);
  }
  return JSON.parse(Buffer.from(bytes).toString("utf8"));
}

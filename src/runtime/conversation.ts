import { digestOfRecorded, sha256Hex } from "../core/digest.ts";
import { IntegrityError } from "../core/errors.ts";
import type { BlobStore } from "../events/spi.ts";
import type { Message, ModelResponse, ToolCall } from "../events/types.ts";
import { outcomeId } from "../projections/ids.ts";
import type { RunState } from "../projections/runState.ts";

/**
 * The conversation as the journal records it, piece by piece: what the model was told after each
 * of its answers, and the chained prompt digest that model frames record. The loop (RunSession)
 * and the verifier of the CLI (`loom show`) build both from these same functions, so what one
 * writes the other checks.
 */

/** The claim-check envelope a frame records in place of a large output (the record's ADR 0140). */
export interface ClaimCheckEnvelope {
  readonly __loomClaimCheck: 1;
  readonly ref: string;
  readonly size: number;
  readonly digest: string;
}

/** True when a tool output is a claim-check envelope (the output itself is in the blob store at `ref`). */
export const isClaimCheckEnvelope = (v: unknown): v is ClaimCheckEnvelope =>
  typeof v === "object" &&
  v !== null &&
  (v as ClaimCheckEnvelope).__loomClaimCheck === 1 &&
  typeof (v as ClaimCheckEnvelope).ref === "string" &&
  typeof (v as ClaimCheckEnvelope).digest === "string";

/** What the model was fed for one call. */
export interface Fed {
  readonly output: unknown;
  readonly isError: boolean;
}

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
 * What the model was fed for the call at `stepId`, from the folded journal: a settled call's
 * result, a failed tool's outcome decision, or a completed frame's output (a claim-check envelope
 * resolved through `resolve`); undefined while the call has not ended.
 */
export async function fedFromState(
  state: RunState,
  stepId: string,
  resolve: (stepId: string, recorded: unknown) => Promise<unknown>,
): Promise<Fed | undefined> {
  const settled = state.settled[stepId];
  if (settled) return { output: settled.result, isError: settled.status === "error" };
  const frame = state.frames[stepId];
  if (frame?.status === "failed") {
    const choice = state.decisions[outcomeId(stepId)]?.choice as { failed?: unknown } | undefined;
    return { output: choice?.failed, isError: true };
  }
  if (frame?.status === "completed") return { output: await resolve(stepId, frame.output), isError: false };
  return undefined;
}

/**
 * A claim-checked output read back from `blobs` (verified by the blob store against its digest);
 * any other output as it is. `where` names the run and step in errors.
 */
export async function resolveClaimCheck(
  recorded: unknown,
  blobs: BlobStore | undefined,
  where: string,
): Promise<unknown> {
  if (!isClaimCheckEnvelope(recorded)) return recorded;
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
    if (!(e instanceof IntegrityError)) throw e;
    throw new IntegrityError(`${where}: ${e.message}`, e.code);
  }
  return JSON.parse(Buffer.from(bytes).toString("utf8"));
}

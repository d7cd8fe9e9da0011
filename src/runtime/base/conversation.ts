import { digestOfRecorded, sha256Hex } from "../../core/digest.ts";
import { IntegrityError, isIntegrityError } from "../../core/errors.ts";
import type { ClaimCheckEnvelope } from "../../events/claimCheck.ts";
import { outcomeId, toolStepId } from "../../events/ids.ts";
import type { BlobStore } from "../../events/spi.ts";
import type { Message, ModelResponse, ToolCall } from "../../events/types.ts";
import type { FrameState, RunState } from "../../projections/runState.ts";

/**
 * The conversation as the journal records it, piece by piece: what the model was told after each
 * of its answers, and the chained prompt digest that model frames record. The loop (its
 * `Conversation`, below) and the verifier of the CLI (`loom show`) build both from these same
 * functions, so what one writes the other checks.
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

/** The conversation before a compact resume's tail, and where each of its turns starts in it. */
export interface OlderConversation {
  readonly messages: Message[];
  readonly turnStarts: readonly number[];
}

/**
 * One run's conversation as the loop holds it in memory: its messages, where each answered turn
 * starts, the chained prompt digest of the last model call, what the next call is sent when a
 * context policy made its prompt, and what each call fed the model until its turn's results are
 * in the messages. Its one owner is the run's session; the steps update it as they record.
 *
 * @example
 * const talk = new Conversation("support");
 * talk.start({ system: "Be brief." }, "Where is my order?");
 * talk.answered(talk.nextPromptDigest(), response); // the model's answer joins the messages
 */
export class Conversation {
  /** The messages so far (after a compact resume, its tail only until {@link whole} reads the rest). */
  private said: Message[] = [];
  /** Where each answered turn starts in the messages: the index of its assistant message. */
  private starts: number[] = [];
  /** What the next model call is sent when a context policy made it; else the messages. */
  prompt: readonly Message[] | undefined;
  /** Chained prompt digest up to the last model call, and how many messages it covers. */
  private digest = "";
  private digested = 0;
  /**
   * After a compact resume ({@link resumeAt}): reads the conversation before its tail from the
   * journal, once, when the model is first asked (a served turn needs only the tail's digest).
   */
  private older: (() => Promise<OlderConversation>) | undefined;
  private readonly fed = new Map<string, Fed>();
  private readonly toolResultsPushed = new Set<number>();

  constructor(private readonly loopId: string) {}

  /** The conversation so far (after a compact resume, its tail only until {@link whole} reads the rest). */
  get messages(): readonly Message[] {
    return this.said;
  }

  /** Where each answered turn starts in {@link messages} (context policies read it). */
  get turnStarts(): readonly number[] {
    return this.starts;
  }

  /** The first messages of the conversation: the system prompt and the run's input. */
  start(config: { readonly system?: string | undefined }, input: string | readonly Message[]): void {
    this.said.push(...conversationStart(config, input));
  }

  /**
   * Starts the conversation at a recorded turn instead of the run's start (a compact resume): the
   * model's response at the turn before (`response`, called with the chained digest `promptDigest`)
   * is the tail's first message, and `older` reads the messages before it when the model is asked.
   */
  resumeAt(promptDigest: string, response: ModelResponse, older: () => Promise<OlderConversation>): void {
    this.digest = promptDigest;
    this.said = [assistantMessage(response)];
    this.starts = [0]; // the tail's turn; the older turns' starts come with their messages
    this.digested = 0;
    this.older = older;
  }

  /**
   * The whole conversation, as the model is sent it: after a compact resume, the messages before
   * its tail are read from the journal the first time (and kept: the model is sent them every turn).
   */
  async whole(): Promise<readonly Message[]> {
    const older = this.older;
    if (older !== undefined) {
      this.older = undefined;
      const before = await older();
      const shift = before.messages.length;
      this.said = before.messages.concat(this.said);
      this.starts = before.turnStarts.concat(this.starts.map((at) => at + shift));
      this.digested += shift;
    }
    return this.said;
  }

  /** The whole conversation when it needs no reading first (see {@link whole}), else undefined. */
  atHand(): readonly Message[] | undefined {
    return this.older === undefined ? this.said : undefined;
  }

  /** The digest a model call at this point is journaled with: chained, so hashing stays linear. */
  nextPromptDigest(): string {
    return chainedPromptDigest(this.digest, this.said.slice(this.digested));
  }

  /** Records that the model was called with the conversation so far (under `digest`), and what it answered. */
  answered(digest: string, response: ModelResponse): void {
    this.digest = digest;
    this.digested = this.said.length;
    this.starts.push(this.said.length);
    this.said.push(assistantMessage(response));
  }

  /** Keeps what the call at `stepId` fed the model, until its turn's results join the messages. */
  feed(stepId: string, fed: Fed): void {
    this.fed.set(stepId, fed);
  }

  /** What the call at `stepId` fed the model, until its turn's results are in the messages ({@link pushToolResults}). */
  fedFor(stepId: string): Fed | undefined {
    return this.fed.get(stepId);
  }

  /** Adds turn `turn`'s tool results to the conversation, in call order (once). */
  pushToolResults(turn: number, response: ModelResponse): void {
    if (this.toolResultsPushed.has(turn)) return;
    this.toolResultsPushed.add(turn);
    const calls = response.toolCalls;
    for (let index = 0; index < calls.length; index++) {
      const stepId = toolStepId(this.loopId, turn, index);
      this.said.push(toolResultMessage(calls[index] as ToolCall, this.fed.get(stepId)));
      this.fed.delete(stepId); // in the conversation now, and never asked again: not kept for the rest of the run
    }
  }
}

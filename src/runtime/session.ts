import { canonicalJson } from "../core/canonicalJson.ts";
import { digestOfRecorded, sha256Hex } from "../core/digest.ts";
import { IntegrityError, ReplayDivergenceError } from "../core/errors.ts";
import type { Journal } from "../events/spi.ts";
import type { Message, ModelResponse, ToolCall } from "../events/types.ts";
import type { ToolDescriptor } from "../models/types.ts";
import { outcomeId, toolStepId } from "../projections/ids.ts";
import type { RunState } from "../projections/runState.ts";
import type { ToolCallLogMode } from "../projections/types.ts";
import type { Appender } from "./appender.ts";
import { toolDescriptors } from "./builtins.ts";
import type { AgentLoopConfig } from "./config.ts";

/** The claim-check envelope a frame records in place of a large output (the record's ADR 0140). */
export interface ClaimCheckEnvelope {
  readonly __loomClaimCheck: 1;
  readonly ref: string;
  readonly size: number;
  readonly digest: string;
}

export const isClaimCheckEnvelope = (v: unknown): v is ClaimCheckEnvelope =>
  typeof v === "object" && v !== null && (v as { __loomClaimCheck?: unknown }).__loomClaimCheck === 1;

/** What the model was fed for one call. */
export interface Fed {
  readonly output: unknown;
  readonly isError: boolean;
}

/** A tool output prepared for the journal: what the frame records and what the model is fed. */
export type RecordedOutput =
  | { readonly ok: true; readonly recorded: unknown; readonly fed: unknown }
  | { readonly ok: false; readonly message: string };

export interface RunOptions {
  readonly runId: string;
  readonly journal: Journal;
  readonly input?: string | readonly Message[];
  readonly signal?: AbortSignal;
  readonly approvals?: Readonly<Record<string, boolean>>;
}

/**
 * Everything one `loop.run(...)` call knows beside the statechart: the folded journal (kept
 * current by the appender), the conversation rebuilt from it, what each call fed the model, and
 * the chained prompt digest. The runtime's actors share it; the machine never sees it.
 */
export class RunSession {
  appender!: Appender;
  mode: ToolCallLogMode = "full";
  readonly messages: Message[] = [];
  /** Chained prompt digest up to the last model call, and how many messages it covers. */
  promptDigest = "";
  private digested = 0;
  private readonly fed = new Map<string, Fed>();
  private readonly toolResultsPushed = new Set<number>();
  /** What the model is told it can call (the same list on every call of the run). */
  readonly toolDescriptors: readonly ToolDescriptor[];

  constructor(
    readonly config: AgentLoopConfig,
    readonly options: RunOptions,
  ) {
    this.toolDescriptors = toolDescriptors(config);
  }

  get state(): RunState {
    return this.appender.state;
  }

  get loopId(): string {
    return this.config.id;
  }

  /** The first messages of the conversation: the system prompt and the run's input. */
  startConversation(input: string | readonly Message[]): void {
    if (this.config.system !== undefined) this.messages.push({ role: "system", content: this.config.system });
    if (typeof input === "string") this.messages.push({ role: "user", content: input });
    else this.messages.push(...input);
  }

  /** The digest a model call at this point is journaled with: chained, so hashing stays linear. */
  nextPromptDigest(): string {
    const added = digestOfRecorded(this.messages.slice(this.digested)).digest ?? "";
    return sha256Hex(this.promptDigest + added);
  }

  /** Records that the model was called with the conversation so far, and what it answered. */
  modelAnswered(digest: string, response: ModelResponse): void {
    this.promptDigest = digest;
    this.digested = this.messages.length;
    this.messages.push({ role: "assistant", content: response.content, toolCalls: response.toolCalls });
  }

  setFed(stepId: string, fed: Fed): void {
    this.fed.set(stepId, fed);
  }

  getFed(stepId: string): Fed | undefined {
    return this.fed.get(stepId);
  }

  /** Adds turn `turn`'s tool results to the conversation, in call order (once). */
  pushToolResults(turn: number, response: ModelResponse): void {
    if (this.toolResultsPushed.has(turn)) return;
    this.toolResultsPushed.add(turn);
    response.toolCalls.forEach((call, index) => {
      const fed = this.fed.get(toolStepId(this.loopId, turn, index));
      this.messages.push({
        role: "tool",
        toolCallId: call.id,
        toolName: call.name,
        output: fed?.output,
        isError: fed?.isError ?? true,
      });
    });
  }

  /**
   * What the model was fed for a call that the journal shows settled, or undefined if it is not
   * settled yet. A claim-checked output is resolved through the blob store, digest verified.
   */
  async fedFromJournal(stepId: string): Promise<Fed | undefined> {
    const settled = this.state.settled[stepId];
    if (settled) return { output: settled.result, isError: settled.status === "error" };
    const frame = this.state.frames[stepId];
    if (frame?.status === "failed") {
      const choice = this.state.decisions[outcomeId(stepId)]?.choice as { failed?: unknown } | undefined;
      return { output: choice?.failed, isError: true };
    }
    if (frame?.status === "completed")
      return { output: await this.resolveOutput(stepId, frame.output), isError: false };
    return undefined;
  }

  /**
   * The replay-divergence guard for a tool call: if the journal holds a frame at `stepId`, this
   * code must produce the same frame (a configured tool of that name, the same input digest).
   */
  judgeToolFrame(stepId: string, call: ToolCall): void {
    const frame = this.state.frames[stepId];
    if (!frame) return;
    const tools = this.config.tools ?? {};
    const known = Object.hasOwn(tools, call.name);
    if (!known || frame.effect !== `tool:${call.name}`) {
      throw this.divergence(
        stepId,
        `a frame of effect ${frame.effect}, but this code has ${known ? `tool:${call.name}` : `no tool "${call.name}"`}`,
      );
    }
    if (frame.inputDigest !== digestOfRecorded(call.input).digest)
      throw this.divergence(stepId, "a frame with another input digest");
  }

  divergence(frameId: string, what: string): ReplayDivergenceError {
    const runId = this.options.runId;
    return new ReplayDivergenceError(
      runId,
      frameId,
      `run ${runId}: the journal holds ${what} at ${frameId}. The code or configuration changed since the run was recorded; run it with the code that recorded it, or start a new run.`,
    );
  }

  /** Turns a recorded output into what the model is fed: an envelope is replaced by its blob. */
  async resolveOutput(stepId: string, recorded: unknown): Promise<unknown> {
    if (!isClaimCheckEnvelope(recorded)) return recorded;
    const blobs = this.config.claimCheck?.blobs ?? this.options.journal.blobs;
    if (!blobs) {
      throw new IntegrityError(
        `run ${this.options.runId} step ${stepId}: its output is claim-checked (${recorded.ref}) but no blob store is configured; pass claimCheck.blobs or journal.blobs`,
        "blobMissing",
      );
    }
    let bytes: Uint8Array;
    try {
      bytes = await blobs.get(recorded.ref);
    } catch (e) {
      if (!(e instanceof IntegrityError)) throw e;
      throw new IntegrityError(`run ${this.options.runId} step ${stepId}: ${e.message}`, e.code);
    }
    return JSON.parse(Buffer.from(bytes).toString("utf8"));
  }

  /**
   * Prepares a tool's live output for the journal: its JSON round trip (what a resume reads back),
   * claim-checked into the blob store when its canonical JSON exceeds the threshold.
   */
  async recordOutput(output: unknown): Promise<RecordedOutput> {
    let text: string | undefined;
    try {
      text = JSON.stringify(output);
    } catch (e) {
      return { ok: false, message: `the tool's output has no JSON form (${(e as Error).message}); return JSON data` };
    }
    if (text === undefined) return { ok: true, recorded: undefined, fed: undefined };
    const recorded: unknown = JSON.parse(text);
    const claimCheck = this.config.claimCheck;
    // UTF-8 takes at most 3 bytes per UTF-16 unit: shorter texts cannot exceed the threshold.
    if (claimCheck && text.length * 3 > claimCheck.thresholdBytes) {
      let canonical: string | undefined;
      try {
        canonical = canonicalJson(recorded);
      } catch {
        canonical = undefined; // no canonical form (a lone surrogate): keep it inline, its digest is null
      }
      if (canonical !== undefined) {
        const bytes = Buffer.from(canonical, "utf8");
        if (bytes.length > claimCheck.thresholdBytes) {
          const info = await claimCheck.blobs.put(bytes);
          const envelope: ClaimCheckEnvelope = {
            __loomClaimCheck: 1,
            ref: info.ref,
            size: info.size,
            digest: info.digest,
          };
          return { ok: true, recorded: envelope, fed: recorded };
        }
      }
    }
    return { ok: true, recorded, fed: recorded };
  }
}

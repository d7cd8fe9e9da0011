import type { BlobStore } from "../events/spi.ts";
import type { Model } from "../models/types.ts";
import type { ToolCallLogMode } from "../projections/types.ts";

/** What a tool is given besides its input. */
export interface ToolContext {
  /** The tool frame id: the same on every attempt, so use it as an idempotency key. */
  readonly stepId: string;
  /** Aborted when the run is. */
  readonly signal: AbortSignal;
}

/** The result of validating a tool input: the (possibly transformed) value, or a message. */
export type InputCheck =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly message: string };

export interface Tool<I = unknown, O = unknown> {
  readonly description: string;
  /** JSON Schema told to the model. */
  readonly inputSchema?: unknown;
  /** Checks an input before the tool runs; a rejected input is settled as `invalid-input`. */
  readonly validateInput?: (input: unknown) => InputCheck | Promise<InputCheck>;
  execute(input: I, context: ToolContext): O | Promise<O>;
  /** Ask `approve` (or the caller, through an interruption) before running. */
  readonly requiresApproval?: boolean;
  /**
   * A frame started but never completed (a crash mid-tool): `"retry"` runs it again with the
   * same stepId (default); `"fail"` feeds the model an error instead (for tools that must not
   * run twice).
   */
  readonly onUnknownOutcome?: "retry" | "fail";
}

/** A skill: instructions the model can activate by calling the `activate_skill` tool. */
export interface Skill {
  readonly description: string;
  readonly instructions: string;
}

/** An approval answer: yes, no, or not yet (the run interrupts with `approval-pending`). */
export type ApprovalAnswer = boolean | "pending";

export interface ApprovalRequest {
  readonly runId: string;
  readonly stepId: string;
  readonly toolName: string;
  readonly input: unknown;
}

export interface AgentLoopConfig {
  /** The loop id: the prefix of every frame and decision id. */
  readonly id: string;
  readonly model: Model;
  // biome-ignore lint/suspicious/noExplicitAny: tools are heterogeneous; each checks its own input.
  readonly tools?: Readonly<Record<string, Tool<any, unknown>>>;
  /** Upper bound on model calls per run (default 50). */
  readonly maxIterations?: number;
  /**
   * How many tool calls of one model response run (default 128). The calls past it are not run:
   * each is settled as refused (`call.settled`, reason `too-many-calls`, status error) and fed
   * back to the model with a message saying how many calls it may make at once.
   *
   * @example
   * agentLoop$({ id: "support", model, tools, maxToolCallsPerResponse: 32 });
   */
  readonly maxToolCallsPerResponse?: number;
  /** Inputs whose canonical JSON is larger are refused (`input-too-large`; default 64 KiB). */
  readonly maxToolInputBytes?: number;
  readonly approve?: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>;
  /** Outputs whose canonical JSON exceeds `thresholdBytes` go to `blobs`; the frame keeps an envelope. */
  readonly claimCheck?: { readonly blobs: BlobStore; readonly thresholdBytes: number };
  /** The log's shape (ADR 0142). Unset: full, and nothing is journaled. */
  readonly toolCallLog?: ToolCallLogMode;
  /** Offer the `search_tools` call (settled without running a tool). Default true. */
  readonly searchTools?: boolean;
  /** Skills the model can activate with `activate_skill` (settled without running a tool). */
  readonly skills?: Readonly<Record<string, Skill>>;
  /** A system prompt put before the input. */
  readonly system?: string;
}

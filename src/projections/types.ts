import type { ErrorCause, InterruptReason } from "../events/types.ts";

/** The shape of the returned tool-call log. Unset means "full" (and journals no pin). */
export type ToolCallLogMode = "full" | "lean";

/** One tool call in the full log: what the model asked for and the tool's output, as recorded. */
export interface AgentStep {
  /** 0-based index of the model call that asked for the tool. */
  readonly iteration: number;
  readonly toolName: string;
  readonly toolInput: unknown;
  /** What the model was fed: the output, the failure, the refusal, or the claim-check envelope. */
  readonly toolOutput: unknown;
}

/** One tool call in the lean log: the output replaced by its status, size and digest. */
export interface LeanAgentStep {
  readonly iteration: number;
  readonly toolName: string;
  readonly toolInput: unknown;
  /** The isError flag the model was fed. */
  readonly status: "ok" | "error";
  /** UTF-8 length of the canonical JSON of the full entry's toolOutput (0 when it has none). */
  readonly bytes: number;
  /** sha256 hex of that canonical JSON, or null when the output has no JSON form. */
  readonly digest: string | null;
  /** The tool frame id `<loop>#turn:<i>:tool:<j>`: resolve it for the output itself. */
  readonly stepId: string;
  /** Declared so code that reads `entry.toolOutput` compiles in both modes. */
  readonly toolOutput?: undefined;
}

/**
 * The log's type for a loop configured with `toolCallLog: M`: `LeanAgentStep[]` for `"lean"`,
 * `AgentStep[]` for `"full"`, and the union `AgentStep[] | LeanAgentStep[]` where the
 * mode is not known statically (unset, since a resumed run then follows its recorded pin, or
 * a `ToolCallLogMode` variable). Without a type argument it is that union.
 *
 * @example
 * ```ts
 * const lean: ToolCallLog<"lean"> = []; // LeanAgentStep[]
 * const either: ToolCallLog = []; // AgentStep[] | LeanAgentStep[]
 * ```
 */
export type ToolCallLog<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined> = [M] extends ["lean"]
  ? LeanAgentStep[]
  : [M] extends ["full"]
    ? AgentStep[]
    : AgentStep[] | LeanAgentStep[];

/**
 * The loop's value: its answer and its tool-call log. `M` is the loop's configured mode (see `ToolCallLog`):
 * `agentLoop$({ toolCallLog: "lean" })` resolves to `AgentOutput<"lean">`, whose log is
 * `LeanAgentStep[]`; `AgentOutput` alone has the union of both shapes.
 *
 * @example
 * ```ts
 * const loop = agentLoop$({ id: "support", model, toolCallLog: "lean" });
 * const { toolCallLog } = await loop.run({ runId: "r-1", input: "hi", journal });
 * toolCallLog.map((step) => step.stepId); // typed LeanAgentStep[]: no isLeanAgentStep needed
 * ```
 */
export interface AgentOutput<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined> {
  /** The model's final answer. */
  readonly content: string;
  /** Every tool call of the run, in order, in the run's shape. */
  readonly toolCallLog: ToolCallLog<M>;
  /** Number of model calls the run made. */
  readonly iterations: number;
}

/**
 * What an interrupted run carries (`AgentInterruptedError.run`). Its log follows the mode as
 * `AgentOutput`'s does (`M`, see `ToolCallLog`); `isAgentInterruptedError(e, loop)` types it for
 * that loop.
 */
export interface InterruptedAgentRun<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined> {
  readonly runId: string;
  /** Why it stopped: `aborted` (the signal), `max-iterations`, `approval-pending`, `model-error` or `deadline` (`timeouts.runMs`). */
  readonly reason: InterruptReason;
  /** The tool calls settled so far, in the run's shape. */
  readonly toolCallLog: ToolCallLog<M>;
  /** Model calls made so far. */
  readonly iterations: number;
  /**
   * Step ids of tool calls waiting for an approval, with the input each would run with. A call
   * that waits in a sub-agent (`agentTool`) names the sub-agent's run that waits, `runId`: answer
   * it there (`recordApproval(journal, runId, stepId, …)`), then resume this run.
   */
  readonly pendingApprovals: readonly {
    readonly stepId: string;
    readonly toolName: string;
    readonly input: unknown;
    /** The sub-agent's run the call waits in, when it is not this run. */
    readonly runId?: string;
  }[];
  /** The model's error, for a `model-error`: as `run.interrupted` recorded it (the same after a restart). */
  readonly cause?: ErrorCause;
  /**
   * Everything the run waits for: each call that sleeps or waits for an event, and each approval
   * (one kind of wait), with until when and how to end it (docs/waits.md).
   */
  readonly waits: readonly RunWait[];
}

/**
 * One thing a run waits for (`listWaits`, `InterruptedAgentRun.waits`, `loom show`, the viewer):
 * a time (`sleep`), an event delivered with a token (`event`), or a person's answer (`approval`).
 */
export interface RunWait {
  readonly runId: string;
  /** The waiting tool call's step id. */
  readonly stepId: string;
  readonly kind: "sleep" | "event" | "approval";
  readonly toolName: string;
  /** What the wait is for, as the tool said (`what`). */
  readonly what?: string;
  /** A sleep's wake time (ISO 8601). */
  readonly until?: string;
  /** When an event wait times out, or an approval is declined (ISO 8601). */
  readonly expiresAt?: string;
  /** How the wait ends, for a person: the command or call that ends it. */
  readonly deliver: string;
}

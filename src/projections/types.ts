import type { ErrorCause, InterruptReason } from "../events/types.ts";

/** The shape of the returned tool-call log. Unset means "full" (and journals no pin). */
export type ToolCallLogMode = "full" | "lean";

/** One tool call in the full log: exactly the record's shape (ADR 0142 D1). */
export interface AgentStep {
  /** 0-based index of the model call that asked for the tool. */
  readonly iteration: number;
  readonly toolName: string;
  readonly toolInput: unknown;
  /** What the model was fed: the output, the failure, the refusal, or the claim-check envelope. */
  readonly toolOutput: unknown;
}

/** One tool call in the lean log: the output replaced by its status, size and digest (D1, D5). */
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

export type ToolCallLog = AgentStep[] | LeanAgentStep[];

/** The loop's value (ADR 0121 D3). */
export interface AgentOutput {
  readonly content: string;
  readonly toolCallLog: AgentStep[] | LeanAgentStep[];
  /** Number of model calls the run made. */
  readonly iterations: number;
}

/** What an interrupted run carries (`AgentInterruptedError.run`). */
export interface InterruptedAgentRun {
  readonly runId: string;
  readonly reason: InterruptReason;
  readonly toolCallLog: AgentStep[] | LeanAgentStep[];
  readonly iterations: number;
  /** Step ids of tool calls waiting for an approval, with the input each would run with. */
  readonly pendingApprovals: readonly { readonly stepId: string; readonly toolName: string; readonly input: unknown }[];
  /** The model's error, for a `model-error`: as `run.interrupted` recorded it (the same after a restart). */
  readonly cause?: ErrorCause;
}

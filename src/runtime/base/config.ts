import type { BlobStore } from "../../events/spi.ts";
import type { Model } from "../../models/types.ts";
import type { ApprovalPolicy } from "../../policies/approval.ts";
import type { Budget } from "../../policies/budget.ts";
import type { ContextPolicy } from "../../policies/context.ts";
import type { DefinitionChangePolicy } from "../../policies/definition.ts";
import type { RetryPolicy } from "../../policies/retry.ts";
import type { ToolCallLogMode } from "../../projections/types.ts";
import type { Tool, ToolSource } from "../../tools/spi.ts";
import type { SnapshotConfig } from "./snapshots.ts";
import type { RunTelemetry } from "./telemetry.ts";

// The Tool SPI lives below the runtime (models and mcp implement it); the runtime's files import it from here.
export type { InputCheck, Tool, ToolContext, ToolSource, ToolSourceContext } from "../../tools/spi.ts";

/**
 * The loop's failure policy for its calls (see docs/failure-policy.md).
 * Fields not given come from `DEFAULT_MODEL_RETRY` (3 attempts, retrying what says it may
 * succeed later: HTTP 408/409/429/5xx, network errors, `isRetryable`) and `DEFAULT_TOOL_RETRY`
 * (one attempt).
 *
 * @example
 * agentLoop$({ id: "support", model, retry: { model: { maxAttempts: 5, maxDelayMs: 60_000 }, tools: { maxAttempts: 2 } } });
 */
export interface RetryConfig {
  /** Model calls: failed attempts are journaled and tried again after a back-off (a state of the chart). */
  readonly model?: Partial<RetryPolicy>;
  /** Every tool without its own `retry`. */
  readonly tools?: Partial<RetryPolicy>;
}

/**
 * Time limits, in ms. A model attempt past `modelAttemptMs` is aborted and counts as a failed,
 * retryable attempt (`TimeoutError`); a tool past `toolMs` (or its own `timeoutMs`) is aborted and
 * fails unless its retry policy tries it again; `runMs` is the run's deadline, journaled at its
 * start, so it holds across suspensions and restarts: past it, the run interrupts with `deadline`.
 * A streamed model call (a model with `stream`) also fails, retryable, when its first part takes
 * longer than `firstChunkMs`, or the stream then stalls for `chunkIdleMs`.
 *
 * @example
 * agentLoop$({ id: "support", model, timeouts: { modelAttemptMs: 60_000, toolMs: 10_000, runMs: 3_600_000 } });
 * agentLoop$({ id: "chat", model, timeouts: { firstChunkMs: 20_000, chunkIdleMs: 10_000 } });
 */
export interface TimeoutsConfig {
  readonly modelAttemptMs?: number;
  /** A streamed model call whose first delta (or response) takes longer is aborted and retried. */
  readonly firstChunkMs?: number;
  /** A streamed model call whose stream stalls longer between two parts is aborted and retried. */
  readonly chunkIdleMs?: number;
  readonly toolMs?: number;
  readonly runMs?: number;
}

/** A skill: instructions the model can activate by calling the `activate_skill` tool. */
export interface Skill {
  readonly description: string;
  readonly instructions: string;
}

/**
 * An approval answer: `true` runs the call, `false` declines it (the model is told), `"pending"`
 * stops the run with `approval-pending` so the answer can come later, from any process, with
 * `run({ runId, journal, approvals: { [stepId]: true | false } })`.
 */
export type ApprovalAnswer = boolean | "pending";

/** What `AgentLoopConfig.approve` is asked about: one call of a tool with `requiresApproval`. */
export interface ApprovalRequest {
  readonly runId: string;
  /** The call's step id (`<loop>#turn:<i>:tool:<j>`): the key of `run({ approvals })`. */
  readonly stepId: string;
  readonly toolName: string;
  /** The input the call would run with (an approval is journaled with its digest). */
  readonly input: unknown;
}

/**
 * What `agentLoop$` makes a loop from. `M` is the `toolCallLog` mode it is given, which types
 * the log the loop returns (see `ToolCallLog`).
 *
 * @example
 * ```ts
 * const config: AgentLoopConfig<"lean"> = {
 *   id: "support",
 *   model: fromAiSdk(openai("gpt-4.1")),
 *   tools: { lookup, refund },
 *   approve: ({ toolName }) => (toolName === "refund" ? "pending" : true), // a person answers refunds later
 *   toolCallLog: "lean",
 * };
 * const loop = agentLoop$(config);
 * ```
 */
export interface AgentLoopConfig<M extends ToolCallLogMode | undefined = ToolCallLogMode | undefined> {
  /** The loop id: the prefix of every frame and decision id. */
  readonly id: string;
  /** The model the loop calls (`fromAiSdk(model)`, `scriptedModel([...])`, or your own `Model`). */
  readonly model: Model;
  /** The tools the model can call, by name. */
  // biome-ignore lint/suspicious/noExplicitAny: tools are heterogeneous; each checks its own input.
  readonly tools?: Readonly<Record<string, Tool<any, unknown>>>;
  /**
   * Sources of more tools, resolved once per run and journaled (see {@link ToolSource}): MCP
   * servers through `mcpTools(client, { server })` from `loom-agent/mcp`. Their tools' names must
   * not clash with `tools` or with each other's.
   *
   * @example
   * agentLoop$({ id: "assistant", model, tools: { lookup }, toolSources: [mcpTools(client, { server: "files" })] });
   */
  readonly toolSources?: readonly ToolSource[];
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
  /**
   * Asked before a call of a tool with `requiresApproval` runs, once per call (the answer is
   * journaled and served on resume). Unset: every such call is `"pending"`, so the run stops
   * with `approval-pending` and waits for `run({ approvals })`.
   */
  readonly approve?: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>;
  /**
   * Decides the approval of every tool call (of every tool, not only those with
   * `requiresApproval`) that has no policy of its own (`Tool.approval`): `"allow"` runs it,
   * `{ deny: reason }` declines it (the model is told the reason), `"ask"` leaves it to a person
   * (`approve`, a scoped approval, or `run({ approvals })`). Its allow and deny are journaled as
   * the call's decision with `by: "policy"`, like a person's answer.
   *
   * @example
   * agentLoop$({ id: "support", model, tools, approvalPolicy: ({ toolName }) => (toolName === "lookup" ? "allow" : "ask") });
   */
  readonly approvalPolicy?: ApprovalPolicy;
  /** Outputs whose canonical JSON exceeds `thresholdBytes` go to `blobs`; the frame keeps an envelope. */
  readonly claimCheck?: { readonly blobs: BlobStore; readonly thresholdBytes: number };
  /**
   * The tool-call log's shape: "full" (each call's output) or "lean" (its status, size, digest and
   * step id), journaled when the run starts and fixed for its life. Unset: full, and nothing is
   * journaled, so a resume follows whatever the run recorded.
   */
  readonly toolCallLog?: M;
  /**
   * Tell the model of a built-in `search_tools` call that lists the tools whose name or description
   * holds every word of its `query` (settled without running a tool). Default: not told, since
   * every tool is told on every call anyway. Unset, a call of it is still answered (runs recorded
   * by versions that offered it by default resume as they were); `false` refuses it as an unknown tool.
   *
   * @example
   * agentLoop$({ id: "support", model, tools: manyTools, searchTools: true });
   */
  readonly searchTools?: boolean;
  /** Skills the model can activate with `activate_skill` (settled without running a tool). */
  readonly skills?: Readonly<Record<string, Skill>>;
  /** A system prompt put before the input. */
  readonly system?: string;
  /**
   * Which changes of the loop's definition a run recorded under an earlier one may be resumed
   * under: a list of kinds (`"tool-added"`, `"tool-removed"`, `"tool-schema-changed"`,
   * `"system-changed"`) or a predicate. Default: none, so a resume under another definition
   * throws `DefinitionChangedError` before anything is appended.
   *
   * @example
   * agentLoop$({ id: "support", model, tools: { lookup, search }, acceptDefinitionChanges: ["tool-added"] });
   */
  readonly acceptDefinitionChanges?: DefinitionChangePolicy;
  /**
   * Telemetry for the run's work in this process: `otelTelemetry()` from `loom-agent/otel` makes
   * OpenTelemetry spans (a run, each model attempt, each tool call). The trace context of the
   * run's first attempt is journaled, so a resume in any process continues the same trace.
   *
   * @example
   * agentLoop$({ id: "support", model, tools, telemetry: otelTelemetry() });
   */
  readonly telemetry?: RunTelemetry;
  /**
   * Retry policies: `model` for model calls, `tools` for tools without their own `retry`.
   *
   * @example
   * agentLoop$({ id: "support", model, retry: { model: { maxAttempts: 5 } } });
   */
  readonly retry?: RetryConfig;
  /**
   * Time limits: a model attempt, a tool call, the whole run (a deadline journaled at its start).
   *
   * @example
   * agentLoop$({ id: "support", model, timeouts: { modelAttemptMs: 30_000, runMs: 15 * 60_000 } });
   */
  readonly timeouts?: TimeoutsConfig;
  /**
   * The budget of every run of the loop (a run's own `budget` overrides it): limits on model
   * calls, tokens and cost, checked before each model call; reached, the run interrupts with
   * reason `"budget"`. A worker's runs are held to it too.
   *
   * @example
   * agentLoop$({ id: "support", model, budget: { cost: 0.25, prices: { "gpt-4o-mini": { inputPerMillion: 0.15, outputPerMillion: 0.6 } } } });
   */
  readonly budget?: Budget;
  /**
   * What the model is sent of a long conversation: `recentTurns(n)`, `summarize(...)` or your own
   * `ContextPolicy`. Decided before each new model call and journaled (`<loop>#turn:<i>:context`),
   * so a resume sends the same prompts; the prompt digest covers the decision. Unset: the whole
   * conversation, and nothing more is journaled.
   *
   * @example
   * agentLoop$({ id: "researcher", model, tools, context: recentTurns(20) });
   */
  readonly context?: ContextPolicy;
  /**
   * Snapshots of the run's folded state, written beside the run (where the store keeps them:
   * memory, SQLite, PostgreSQL), so a resume reads the latest snapshot and the entries after it
   * instead of the whole journal. Each is checked by its digest when read; one that fails is told
   * to `onWarning` and the whole journal is folded.
   *
   * Unset: compact snapshots every 1,000 entries (`{ every: 1000, compact: true }`): each holds
   * what a resume needs and costs what was appended since the previous one, so a resume reaches
   * its first new step in about the same time whatever the run's length. `false`: none are
   * written. `{ every }`: full snapshots (every frame), which `foldRun` and `loom` also start from,
   * each costing as much as the whole state. A resume uses a snapshot found in the journal
   * whether or not this is set.
   *
   * @example
   * agentLoop$({ id: "support", model, tools }); // compact snapshots every 1,000 entries
   * agentLoop$({ id: "support", model, tools, snapshots: { every: 1000, onWarning: (e) => log.warn(e.message) } });
   * agentLoop$({ id: "support", model, tools, snapshots: false }); // none
   */
  readonly snapshots?: SnapshotConfig | false;
}

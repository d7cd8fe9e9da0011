import type { BlobStore, Journal } from "../events/spi.ts";
import type { ListedTool } from "../events/toolList.ts";
import type { Model } from "../models/types.ts";
import type { DefinitionChangePolicy } from "../policies/definition.ts";
import type { RetryPolicy } from "../policies/retry.ts";
import type { ToolCallLogMode } from "../projections/types.ts";
import type { RunContext } from "./runContext.ts";
import type { RunTelemetry } from "./telemetry.ts";

/** What a tool is given besides its input. */
export interface ToolContext {
  /**
   * The key to hand a service that must not act twice (a payment API's `Idempotency-Key`): unique
   * to the run and the step, and the same on every attempt, resume and process that runs this
   * call. `idempotencyKey(runId, stepId)`: a 36-character name-based UUID, see there why.
   *
   * @example
   * execute: ({ orderId, cents }, { idempotencyKey }) => payments.refund(orderId, cents, { idempotencyKey })
   */
  readonly idempotencyKey: string;
  /**
   * The tool frame id, `<loop>#turn:<i>:tool:<j>`: the same on every attempt, and the same step of
   * every run of the loop, so it is NOT an idempotency key (use `idempotencyKey`); it names the
   * step in the journal (`loom show <stepId>`).
   */
  readonly stepId: string;
  /** Aborted when the run is. */
  readonly signal: AbortSignal;
  /** The run the call belongs to (set by the runtime; absent when a tool is called outside a run). */
  readonly runId?: string;
  /** The journal the run is in (set by the runtime): `agentTool` runs its child run there. */
  readonly journal?: Journal;
  /**
   * The run the call belongs to, in this process (set by the runtime; absent when a tool is called
   * outside a run): its `runId`, its `depth` in a chain of sub-agents (0 for a run `loop.run`
   * started), the `parent` run that started it as a sub-agent and the sub-agent runs it has going
   * now (`children`). `agentTool` starts its child run with a child of it, which is how a child's
   * events, inspector and approval answers follow its parent's. Only read it: it lives as long as
   * the run does.
   *
   * @example
   * execute: (_input, { run }) => `running ${run?.depth ?? 0} sub-agents deep, in ${run?.runId}`
   */
  readonly run?: RunContext;
}

/** The result of validating a tool input: the (possibly transformed) value, or a message. */
export type InputCheck =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly message: string };

/**
 * A tool the model can call: `I` is its input, `O` its output (any JSON value). Its output is
 * journaled in the call's frame, so a resumed run feeds the model the recorded output instead
 * of running the tool again.
 *
 * @example
 * ```ts
 * const refund: Tool<{ orderId: string; cents: number }> = {
 *   description: "refunds an order",
 *   inputSchema: { type: "object", properties: { orderId: { type: "string" }, cents: { type: "integer" } } },
 *   requiresApproval: true, // a person says yes first
 *   onUnknownOutcome: "fail", // never twice: a crash mid-call is reported to the model instead
 *   execute: ({ orderId, cents }, { idempotencyKey }) => payments.refund(orderId, cents, { idempotencyKey }),
 * };
 * ```
 */
export interface Tool<I = unknown, O = unknown> {
  /** What the tool does, told to the model. */
  readonly description: string;
  /** JSON Schema told to the model. */
  readonly inputSchema?: unknown;
  /** Checks an input before the tool runs; a rejected input is settled as `invalid-input`. */
  readonly validateInput?: (input: unknown) => InputCheck | Promise<InputCheck>;
  /**
   * Runs the call: returns (or resolves to) the output fed back to the model. A throw is not a
   * crash: the error is journaled as the call's outcome and fed back as an error result. The
   * context's `idempotencyKey` is the same on every attempt of this call and differs from run to run.
   */
  execute(input: I, context: ToolContext): O | Promise<O>;
  /**
   * Ask before running: `AgentLoopConfig.approve` if set, else the run stops with
   * `approval-pending` and the caller answers with `run({ approvals })`. See the README's
   * "Approvals".
   */
  readonly requiresApproval?: boolean;
  /**
   * With `requiresApproval`: how long an approval may wait, in ms from when the run first stopped
   * for it. Once passed, the call is declined (journaled with reason `approval-expired`, and the
   * model told), also when no process was running at that moment: the run declines it when it
   * resumes. `listPendingApprovals` reports the expiry.
   *
   * @example
   * const refund: Tool = { description: "refunds an order", requiresApproval: true, approvalTimeoutMs: 86_400_000, execute };
   */
  readonly approvalTimeoutMs?: number;
  /**
   * A frame started but never completed (a crash mid-tool): `"retry"` runs it again with the
   * same `idempotencyKey` (default); `"fail"` feeds the model an error instead (for tools that must not
   * run twice).
   */
  readonly onUnknownOutcome?: "retry" | "fail";
  /**
   * How a call that throws (or passes `timeoutMs`) is tried again; fields not given come from
   * `AgentLoopConfig.retry.tools`, then `DEFAULT_TOOL_RETRY` (one attempt: no retry). A throw is
   * retryable unless the error says otherwise (`isRetryable: false`, HTTP 400/401/403). Each
   * failed attempt is journaled; the last one's error is fed back to the model.
   *
   * @example
   * const lookup: Tool<{ id: string }> = { description: "looks an order up", execute, retry: { maxAttempts: 3 }, timeoutMs: 5_000 };
   */
  readonly retry?: Partial<RetryPolicy>;
  /** A call that has not answered after this many ms is aborted (its signal) and fails (default: `timeouts.toolMs`). */
  readonly timeoutMs?: number;
}

/** What a tool source is given when it lists its tools. */
export interface ToolSourceContext {
  readonly runId: string;
  /** Aborted when the run is. */
  readonly signal: AbortSignal | undefined;
}

/**
 * Tools that come from elsewhere, resolved once per run (an MCP server's: `mcpTools` in
 * `loom-agent/mcp`). When a run starts, the runtime asks the source to `list` its tools and
 * journals the list (the decision `<loop>#tools:<name>`); a resume reads that list back instead,
 * so the model is told the same tools after a crash and the source is not asked again. `tools`
 * makes the run's tools from the list (journaled or live: always its JSON form), and each of their
 * calls is a journaled frame like any tool's. The definition pin covers the source's `name`, not
 * its list.
 *
 * @example
 * ```ts
 * const weather: ToolSource = {
 *   name: "weather",
 *   list: async () => (await fetch(`${base}/tools`)).json(), // [{ name, description, inputSchema }]
 *   tools: (listed) =>
 *     Object.fromEntries(listed.map((t) => [t.name, { description: t.description ?? "", inputSchema: t.inputSchema, execute: (input) => call(t.name, input) }])),
 * };
 * agentLoop$({ id: "assistant", model, toolSources: [weather] });
 * ```
 */
export interface ToolSource {
  /** Names the source in the journal (`<loop>#tools:<name>`) and the definition pin: letters, digits, `_.:-`. */
  readonly name: string;
  /** The source's tools, live: asked once per run, when the run has no journaled list yet. */
  list(context: ToolSourceContext): Promise<readonly ListedTool[]>;
  /**
   * The run's tools made from a list (by the name the model calls each): no I/O here, a tool
   * reaches its source only when it is called.
   */
  // biome-ignore lint/suspicious/noExplicitAny: tools are heterogeneous; each checks its own input.
  tools(listed: readonly ListedTool[]): Readonly<Record<string, Tool<any, unknown>>>;
}

/**
 * The loop's failure policy for its calls (see README "Failure policy: retries and timeouts").
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
  /** Outputs whose canonical JSON exceeds `thresholdBytes` go to `blobs`; the frame keeps an envelope. */
  readonly claimCheck?: { readonly blobs: BlobStore; readonly thresholdBytes: number };
  /** The log's shape (ADR 0142). Unset: full, and nothing is journaled. */
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
}

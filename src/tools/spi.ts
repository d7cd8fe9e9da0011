/**
 * The Tool SPI: what a tool is, what it is given when it runs, and a source of tools (an MCP
 * server's). Below the runtime, so a tool adapter (`loom-agent/ai-sdk`'s `fromAiSdkTool`,
 * `loom-agent/mcp`'s `mcpTools`) implements it without importing the runtime that calls it.
 */
import type { Journal } from "../events/spi.ts";
import type { ListedTool } from "../events/toolList.ts";
import type { ApprovalPolicy } from "../policies/approval.ts";
import type { RetryPolicy } from "../policies/retry.ts";
import type { WaitContext } from "./wait.ts";

/**
 * What a tool is given besides its input. Its `sleep`, `waitUntil` and `waitForEvent` make a
 * durable wait the tool returns (docs/waits.md).
 */
export interface ToolContext extends WaitContext {
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
  readonly run?: ToolRun;
}

/**
 * What a tool reads of the run it is called in (`ToolContext.run`): the runtime's `RunContext`,
 * seen from below the runtime.
 */
export interface ToolRun {
  /** The run's id. */
  readonly runId: string;
  /** How many sub-agents deep the run is: 0 for a run `loop.run` started. */
  readonly depth: number;
  /** The run whose `agentTool` call started this one, if any. */
  readonly parent?: ToolRun | undefined;
  /** The sub-agent runs this run has going now. */
  readonly children: ReadonlySet<ToolRun>;
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
   * The tool changes the world (sends, pays, writes): a replay of a recorded run (`replayRun`)
   * never executes it unless its `tools` option names it `"live"`; a call the record cannot serve
   * fails instead.
   */
  readonly sideEffects?: boolean;
  /**
   * Ask before running: `AgentLoopConfig.approve` if set, else the run stops with
   * `approval-pending` and the caller answers with `run({ approvals })`. See
   * docs/approvals.md.
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
   * Decides each call's approval before a person is asked: `"allow"`, `{ deny: reason }` or
   * `"ask"` (see {@link ApprovalPolicy}). Its allow and deny are journaled as the call's decision,
   * `by: "policy"`. A tool with a policy asks for approval (`requiresApproval` is implied); it is
   * asked instead of the loop's `approvalPolicy`.
   *
   * @example
   * const refund: Tool<{ euros: number }> = { description: "refunds", execute, approval: ({ input }) => ((input as { euros: number }).euros <= 20 ? "allow" : "ask") };
   */
  readonly approval?: ApprovalPolicy;
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

import { digestOfRecorded } from "../../core/digest.ts";
import { DECISION_SOURCES, idempotencyKey, outcomeId, toolStepId, waitId } from "../../events/ids.ts";
import type {
  AttemptError,
  CallSettledData,
  ModelResponse,
  NewEntry,
  SettledReason,
  ToolCall,
} from "../../events/types.ts";
import type { CheckOutput, RunToolOutput, ToolCallInput } from "../../machines/toolCall.machine.ts";
import type { RetryPolicy } from "../../policies/retry.ts";
import { asWaitChoice, decideWait, type WaitChoice } from "../../policies/wait.ts";
import { type FrameState, responseAt } from "../../projections/runState.ts";
import { isWaitRequest, type WaitRequest, waitContext } from "../../tools/wait.ts";
import { AppendAfterCloseError } from "../base/appender.ts";
import { completedData } from "../base/callResult.ts";
import type { Tool } from "../base/config.ts";
import type { StepStop } from "../base/runStop.ts";
import { isSubAgentTool } from "../subruns/subAgentTools.ts";
import { subRunWaits } from "../subruns/subRuns.ts";
import { answersSearchTools, SEARCH_TOOLS, SKILL_ACTIVATION, searchTools } from "./builtins.ts";
import { CallOrder } from "./callOrder.ts";
import { durableStep, type StepEffect } from "./durableStep.ts";
import { toolAttemptError, toolPolicy } from "./failurePolicy.ts";
import type { CallSteps } from "./plainCalls.ts";
import type { RunSession } from "./session.ts";
import { type SessionScope, sessionScopesBefore } from "./sessionScopes.ts";
import { invalidInputMessage, noCanonicalForm } from "./toolInput.ts";

/** Tool calls of one model response that run when the loop does not say (`maxToolCallsPerResponse`). */
export const DEFAULT_MAX_TOOL_CALLS_PER_RESPONSE = 128;

/**
 * One run's tool calls, as the toolCall chart's actors (below, built once) run them. Each first
 * serves what the journal already says about the call (settled, completed, failed, decided) and
 * only then does new work. One object a run, its bookkeeping made when a call first needs it.
 */
export class ToolCalls implements CallSteps, ToolSteps {
  /** Inputs that passed validateInput, possibly transformed by it: what the tool runs with. */
  private validated: Map<string, unknown> | undefined;
  /** The digests of the inputs `check` cleared to run: what their frames record (not hashed again). */
  private inputDigests: Map<string, string> | undefined;
  /** The calls past maxToolCallsPerResponse of each turn, refused in one append (not one a call). */
  private excessRefused: Map<number, Promise<void>> | undefined;
  /** Tools of this run executing now. */
  private running = 0;
  /** `tool:<name>`, made once a tool name (a call's frame records it). */
  private effects: Map<string, string> | undefined;
  /** Whether a tool may be tried again (its retry policy), once a tool. */
  private retries: Map<Tool, boolean> | undefined;
  /** The run's clock, for the waits a tool makes (one function for the run, not one a call). */
  private clock: (() => number) | undefined;
  /** The order the calls of the current turn journal their starts in (callOrder.ts). */
  private order: CallOrder | undefined;
  /** The session-wide approvals of the earlier messages of the run's session, read once when a call first needs them. */
  private scopes: Promise<ReadonlyMap<string, SessionScope> | undefined> | undefined;

  constructor(readonly session: RunSession) {}

  /** The calls of one response that run (`maxToolCallsPerResponse`). */
  private get maxCalls(): number {
    return this.session.config.maxToolCallsPerResponse ?? DEFAULT_MAX_TOOL_CALLS_PER_RESPONSE;
  }

  /** The order of `input`'s turn; undefined for a call of a turn the run has left (it journals nothing more). */
  private orderOf(input: ToolCallInput): CallOrder | undefined {
    const order = this.order;
    if (order !== undefined && order.turn >= input.turn) return order.turn === input.turn ? order : undefined;
    this.order = new CallOrder(input.turn);
    return this.order;
  }

  /** Undefined when `input`'s call may journal its start now, else a promise that resolves when it may. */
  turnOf(input: ToolCallInput): Promise<void> | undefined {
    return this.orderOf(input)?.turnOf(input.index);
  }

  /** `input`'s call journaled its start, or journals none now: the next call goes. */
  passed(input: ToolCallInput): void {
    this.orderOf(input)?.pass(input.index);
  }

  /**
   * Journals a call's `frame.started` in its turn (after every call before it journaled its
   * start), then waits until every call of its batch has, so that the tool runs only once the
   * starts of the whole batch are journaled, in call order, before any result.
   */
  async start(input: ToolCallInput, started: NewEntry): Promise<void> {
    const order = this.orderOf(input);
    const turn = order?.turnOf(input.index);
    if (turn !== undefined) await turn;
    const durable = this.session.appender.append(started);
    order?.pass(input.index);
    await durable;
    const batch = order?.allBefore(input.batchEnd ?? input.index + 1);
    if (batch !== undefined) await batch;
  }

  private refuseExcessCalls(turn: number, input: ToolCallInput): Promise<void> {
    this.excessRefused ??= new Map();
    let refused = this.excessRefused.get(turn);
    if (refused === undefined) {
      refused = this.appendExcessRefusals(turn, input);
      this.excessRefused.set(turn, refused);
    }
    return refused;
  }

  private async appendExcessRefusals(turn: number, input: ToolCallInput): Promise<void> {
    const { session, maxCalls } = this;
    // In the turn of the first call refused: every call that runs journals its start first.
    const first = this.orderOf(input)?.turnOf(maxCalls);
    if (first !== undefined) await first;
    const asked = responseAt(session.state, turn)?.toolCalls.length ?? 0;
    const entries: NewEntry[] = [];
    for (let index = maxCalls; index < asked; index++) {
      const stepId = toolStepId(session.loopId, turn, index);
      if (session.state.settled[stepId] || session.state.frames[stepId]) continue;
      const result = {
        error: "too-many-calls",
        message: `this response asked for ${asked} tool calls, but at most ${maxCalls} run per response: the first ${maxCalls} ran, this one (call ${index}) did not; ask for it again, at most ${maxCalls} calls at a time`,
      };
      entries.push({ type: "call.settled", data: { stepId, status: "error", reason: "too-many-calls", result } });
    }
    if (entries.length > 0) await session.appender.append(...entries);
  }

  private async settle(input: ToolCallInput, reason: SettledReason, status: "ok" | "error", result: unknown) {
    const session = this.session;
    const stepId = input.stepId;
    const turn = this.turnOf(input);
    if (turn !== undefined) await turn;
    const data: CallSettledData = { stepId, status, reason, result };
    session.appender.defer({ type: "call.settled", data }); // no effect ran: durable with the next append
    const recorded = session.state.settled[stepId];
    session.setFed(stepId, { output: recorded?.result, isError: status === "error" });
    return { kind: "settled", status } as const;
  }

  /**
   * `validating`: served from the journal, refused (journaled as call.settled), or cleared to run.
   * A call that does not go on to run (or to its approval) passes its turn (callOrder.ts).
   */
  check(input: ToolCallInput): Promise<CheckOutput> {
    return this.checked(input).then(
      (out) => {
        if (out.kind === "settled") this.passed(input);
        return out;
      },
      (error: unknown) => {
        this.passed(input);
        throw error;
      },
    );
  }

  private async checked(input: ToolCallInput): Promise<CheckOutput> {
    const session = this.session;
    const config = session.config;
    const { stepId, call } = input;
    const breath = session.breathe();
    if (breath !== undefined) await breath;
    const tools = session.tools;
    const tool: Tool | undefined = Object.hasOwn(tools, call.name) ? tools[call.name] : undefined;
    // A call the journal holds nothing of (most: a new one) has nothing to serve.
    const recorded = session.holdsCall(stepId) ? await session.serveCall(stepId, call) : undefined;
    if (recorded) return { kind: "settled", status: recorded.isError ? "error" : "ok" };
    if (input.index >= this.maxCalls) {
      await this.refuseExcessCalls(input.turn, input);
      const refused = session.state.settled[stepId];
      if (refused) {
        session.setFed(stepId, { output: refused.result, isError: true });
        return { kind: "settled", status: "error" };
      }
      // A frame this call started under a higher limit: it goes on as it began.
    }
    if (!tool) {
      if (call.name === SEARCH_TOOLS && answersSearchTools(config)) {
        return this.settle(input, "search-tools", "ok", searchTools(tools, call.input));
      }
      if (call.name === SKILL_ACTIVATION && config.skills) {
        const name = (call.input as { name?: unknown } | null)?.name;
        const skill = typeof name === "string" && Object.hasOwn(config.skills, name) ? config.skills[name] : undefined;
        return skill
          ? this.settle(input, "skill-activation", "ok", { skill: name, instructions: skill.instructions })
          : this.settle(input, "skill-activation", "error", {
              error: "unknown-skill",
              message: `no skill named ${JSON.stringify(name)}; available: ${Object.keys(config.skills).join(", ")}`,
            });
      }
      return this.settle(input, "unknown-tool", "error", {
        error: "unknown-tool",
        message: `no tool named ${JSON.stringify(call.name)}; available: ${Object.keys(tools).join(", ") || "none"}`,
      });
    }
    const { digest, bytes: size } = digestOfRecorded(call.input);
    const invalid = invalidInputMessage(call.input) ?? (digest === null ? noCanonicalForm(call.input) : undefined);
    if (invalid) return this.settle(input, "invalid-input", "error", { error: "invalid-input", message: invalid });
    const maxInputBytes = config.maxToolInputBytes ?? 64 * 1024;
    if (size > maxInputBytes) {
      return this.settle(input, "input-too-large", "error", {
        error: "input-too-large",
        message: `the input is ${size} bytes; ${call.name} takes at most ${maxInputBytes}`,
      });
    }
    let value: unknown = call.input;
    if (tool.validateInput) {
      const check = await tool.validateInput(call.input);
      if (!check.ok)
        return this.settle(input, "invalid-input", "error", { error: "invalid-input", message: check.message });
      value = check.value;
    }
    (this.validated ??= new Map()).set(stepId, value);
    (this.inputDigests ??= new Map()).set(stepId, digest ?? "");
    return this.asksApproval(tool) ? { kind: "needs-approval" } : { kind: "run" };
  }

  /** The session-wide approvals given in the earlier messages' runs of this run's session (sessionScopes.ts). */
  sessionScopes(): Promise<ReadonlyMap<string, SessionScope> | undefined> {
    const { journal, runId } = this.session.options;
    this.scopes ??= sessionScopesBefore(journal, runId);
    return this.scopes;
  }

  /** Has call `stepId` run with an input approved in place of the model's (checked by its tool already). */
  runWith(stepId: string, value: unknown, inputDigest: string): void {
    (this.validated ??= new Map()).set(stepId, value);
    (this.inputDigests ??= new Map()).set(stepId, inputDigest);
  }

  /**
   * Journals a tool's result (and what follows it). Write-ahead only needs it durable with the next
   * model call's frame.started, which it rides with when this was the turn's last running tool. While
   * other tools of the turn still run (they may take minutes), it is written now: a finished tool
   * must not run again because a slow neighbour kept its result in memory when the process died.
   */
  private recordResult(...entries: NewEntry[]): Promise<void> | undefined {
    // Undefined when nothing is written now: the caller need not wait.
    this.session.appender.defer(...entries);
    return this.running > 0 ? this.session.appender.flush() : undefined;
  }

  private async fail(
    stepId: string,
    failed: unknown,
    started: boolean,
    inputDigest: string,
    effect: string,
    attempt?: NewEntry,
  ) {
    const flushed = this.recordResult(
      ...(started ? [] : [{ type: "frame.started", data: { frameId: stepId, effect, inputDigest } } as const]),
      ...(attempt ? [attempt] : []),
      { type: "frame.completed", data: { frameId: stepId, failed: true } },
      {
        type: "decision.recorded",
        data: { decisionId: outcomeId(stepId), source: DECISION_SOURCES.outcome, choice: { failed } },
      },
    );
    if (flushed !== undefined) await flushed;
    const choice = this.session.state.decisions[outcomeId(stepId)]?.choice as { failed?: unknown } | undefined;
    this.session.setFed(stepId, { output: choice?.failed, isError: true });
    return { status: "error" } as const;
  }

  /** Journals a tool's output as its frame's completion (claim-checked when large) and feeds it. */
  private async complete(stepId: string, output: unknown, inputDigest: string, effect: string): Promise<RunToolOutput> {
    const made = this.session.recordOutput(output);
    const prepared = made instanceof Promise ? await made : made; // a promise only when claim-checked
    if (!prepared.ok)
      return this.fail(stepId, { error: "output-not-json", message: prepared.message }, true, inputDigest, effect);
    const flushed = this.recordResult({ type: "frame.completed", data: completedData(stepId, prepared) });
    if (flushed !== undefined) await flushed; // written now only while other tools of the turn run
    this.session.setFed(stepId, { output: prepared.fed, isError: false });
    return { status: "ok" };
  }

  /**
   * The tool returned a wait (docs/waits.md): journaled now (its token may be out already), the
   * frame left started; the run interrupts with `waiting` once no call is open.
   */
  private async startWait(stepId: string, wait: WaitRequest): Promise<RunToolOutput> {
    await this.session.appender.append({
      type: "decision.recorded",
      data: { decisionId: waitId(stepId), source: DECISION_SOURCES.wait, choice: this.waitChoice(wait.choice) },
    });
    return { status: "waiting" };
  }

  /**
   * What an event wait records beside the tool's choice: the loop's claim-check threshold, for
   * `deliverEvent` to put a large payload where the loop puts a large output. It is delivered from
   * outside the run, where only the journal's blob store is at hand: recorded only when the loop's
   * `claimCheck.blobs` is that store.
   */
  private waitChoice(choice: WaitChoice): WaitChoice {
    if (choice.kind !== "event") return choice;
    const claimCheck = this.session.config.claimCheck;
    if (claimCheck === undefined || claimCheck.blobs !== this.session.options.journal.blobs) return choice;
    return { ...choice, claimCheckBytes: claimCheck.thresholdBytes };
  }

  /**
   * A call whose wait is journaled and whose frame is still started, resumed: waits on (nothing
   * journaled, never shortened), wakes (a due sleep completes with its result) or expires (an event
   * wait past its timeout fails, the model told). Undefined for a call that does not wait.
   */
  private async resumeWait(stepId: string, inputDigest: string, effect: string): Promise<RunToolOutput | undefined> {
    const session = this.session;
    const decision = session.state.decisions[waitId(stepId)];
    if (decision === undefined || session.state.frames[stepId]?.status !== "started") return undefined;
    const wait = asWaitChoice(decision.choice);
    if (wait === undefined) return undefined; // not a wait Loom wrote: the frame's outcome is unknown, as any
    const decided = decideWait(wait, session.now());
    switch (decided.kind) {
      case "wait":
        return { status: "waiting" };
      case "wake":
        return this.complete(stepId, decided.output, inputDigest, effect);
      case "expired":
        return this.fail(stepId, decided.failed, true, inputDigest, effect);
    }
  }

  /**
   * `running`: the tool as a durable step, its result (or failure) journaled and fed. `actor`'s
   * signal is read only when the tool runs (a served call makes none). However it ends, the call
   * has passed its turn (callOrder.ts): a tool that runs passes it once its start is journaled.
   */
  run(input: ToolCallInput, actor: { readonly signal: AbortSignal }): Promise<RunToolOutput> {
    return this.runCall(input, actor).finally(() => this.passed(input));
  }

  private async runCall(input: ToolCallInput, actor: { readonly signal: AbortSignal }): Promise<RunToolOutput> {
    const session = this.session;
    const { stepId, call } = input;
    const breath = session.breathe();
    if (breath !== undefined) await breath;
    const tool = session.tools[call.name] as Tool;
    const effect = this.effectOf(call.name);
    const checked = this.inputDigests?.get(stepId);
    this.inputDigests?.delete(stepId); // one entry a call in flight, not one a call of the run (a retry hashes again)
    const inputDigest = checked ?? digestOfRecorded(call.input).digest ?? "";
    // Only a call whose wait the journal holds is resumed as one (most calls never waited).
    if (session.state.decisions[waitId(stepId)] !== undefined) {
      const waited = await this.resumeWait(stepId, inputDigest, effect);
      if (waited !== undefined) return waited;
    }
    const result = await durableStep<unknown, RunToolOutput>(
      session,
      { frameId: stepId, effect, inputDigest, onUnknownOutcome: tool.onUnknownOutcome === "fail" ? "fail" : "rerun" },
      new ToolStep(this, input, tool, inputDigest, effect, actor),
    );
    switch (result.kind) {
      case "done":
        return result.value;
      case "retry":
        return { status: "retry", attempt: result.attempt, delayMs: result.delayMs };
      case "outcome-unknown":
        return this.fail(
          stepId,
          {
            error: "outcome-unknown",
            message: `${call.name} was started (step ${stepId}) but its outcome was never recorded; it is not run twice`,
          },
          true,
          inputDigest,
          effect,
        );
      // Past the run's deadline: not run, or stopped (the next model step interrupts the run with `deadline`).
      case "past-deadline":
        return this.fail(
          stepId,
          { error: "deadline", message: `the run's deadline (timeouts.runMs) passed; ${call.name} was stopped` },
          result.started,
          inputDigest,
          effect,
        );
      case "gave-up": {
        if (subRunWaits(session.run, stepId, result.thrown)) return { status: "pending" }; // a sub-agent waits for an approval
        const e = result.thrown;
        const fed = result.timedOut
          ? { error: result.error.name, message: result.error.message }
          : e instanceof Error
            ? { error: e.name, message: e.message }
            : { error: "Error", message: String(e) };
        // A tool with one attempt (the default) journals its failure as before: its outcome alone.
        const retried = toolPolicy(session.config, tool).maxAttempts > 1;
        return this.fail(stepId, fed, true, inputDigest, effect, retried ? result.record : undefined);
      }
      default:
        // Stopped by the abort: the outcome is unknown, so nothing is journaled (onUnknownOutcome decides on resume).
        throw new AppendAfterCloseError(session.options.runId, "aborted");
    }
  }

  private effectOf(name: string): string {
    this.effects ??= new Map();
    let effect = this.effects.get(name);
    if (effect === undefined) {
      effect = `tool:${name}`;
      this.effects.set(name, effect);
    }
    return effect;
  }

  /** Runs the tool once (counted as running while it does). */
  execute(stepId: string, call: ToolCall, tool: Tool, stop: StepStop): unknown {
    const session = this.session;
    const { runId, journal } = session.options;
    this.running++;
    let ran: unknown;
    try {
      const validated = this.validated;
      // The signal is made when the tool reads it: a tool that never looks costs the step none.
      ran = tool.execute(validated?.has(stepId) ? validated.get(stepId) : call.input, {
        // Computed when the tool reads it, like the signal: a tool that never looks hashes nothing.
        get idempotencyKey(): string {
          return idempotencyKey(runId, stepId);
        },
        stepId,
        get signal(): AbortSignal {
          return stop.signal;
        },
        runId,
        journal,
        run: session.run,
        ...waitContext(runId, stepId, (this.clock ??= () => session.now())),
      });
    } catch (e) {
      this.running--;
      throw e;
    }
    // Counted as running until it settles (as `await` would, a thenable too).
    if (!isThenable(ran)) {
      this.running--;
      return ran;
    }
    return Promise.resolve(ran).then(
      (value) => {
        this.running--;
        return value;
      },
      (error: unknown) => {
        this.running--;
        throw error;
      },
    );
  }

  /** Journals a tool's output (or its wait) and feeds it. */
  record(stepId: string, output: unknown, inputDigest: string, effect: string): Promise<RunToolOutput> {
    return isWaitRequest(output) ? this.startWait(stepId, output) : this.complete(stepId, output, inputDigest, effect);
  }

  /**
   * The calls of a response that need their own toolCall chart: a tool that asks for approval, or
   * may be tried again (its retry policy, or a failed attempt the journal holds), or runs a
   * sub-agent (whose chart the inspector shows under the call's actor), can wait, and a wait is a
   * state of the chart. The others are dispatched as plain calls (plainCalls.ts).
   */
  chartedCalls(turn: number, response: ModelResponse): readonly number[] | undefined {
    const session = this.session;
    let charted: number[] | undefined;
    const calls = response.toolCalls;
    for (let index = 0; index < calls.length; index++) {
      const name = (calls[index] as ToolCall).name;
      const tool = Object.hasOwn(session.tools, name) ? session.tools[name] : undefined;
      if (tool === undefined) continue; // refused or built in: settled without waiting
      const retried = session.state.attempts[toolStepId(session.loopId, turn, index)] !== undefined;
      if (this.asksApproval(tool) || retried || this.mayRetry(tool) || isSubAgentTool(tool))
        (charted ??= []).push(index);
    }
    return charted;
  }

  /** A call of `tool` is approved first: the tool asks for it, has a policy, or the loop has one for every tool. */
  private asksApproval(tool: Tool): boolean {
    return (
      tool.requiresApproval === true || tool.approval !== undefined || this.session.config.approvalPolicy !== undefined
    );
  }

  private mayRetry(tool: Tool): boolean {
    this.retries ??= new Map();
    let may = this.retries.get(tool);
    if (may === undefined) {
      may = toolPolicy(this.session.config, tool).maxAttempts > 1;
      this.retries.set(tool, may);
    }
    return may;
  }
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === "object" || typeof value === "function") &&
  value !== null &&
  typeof (value as { then?: unknown }).then === "function";

/** What a {@link ToolStep} calls back into: the run's session and its tool actors' bookkeeping. */
interface ToolSteps {
  readonly session: RunSession;
  /** Runs the tool once (counted as running while it does). */
  execute(stepId: string, call: ToolCall, tool: Tool, stop: StepStop): unknown;
  /** Journals its output (or its wait) and feeds it. */
  record(stepId: string, output: unknown, inputDigest: string, effect: string): Promise<RunToolOutput>;
  /** Journals its `frame.started` in call order; resolves once its batch's starts are journaled. */
  start(input: ToolCallInput, started: NewEntry): Promise<void>;
}

/**
 * One tool call as a durable step: its hooks are methods of one object a call (a literal of
 * closures cost a call nine functions), and a module's class, so the step's calls into it see one
 * shape in every run.
 */
class ToolStep implements StepEffect<unknown, RunToolOutput> {
  readonly timeoutMs: number | undefined;
  private toolStop: StepStop | undefined;

  constructor(
    private readonly steps: ToolSteps,
    private readonly input: ToolCallInput,
    private readonly tool: Tool,
    private readonly inputDigest: string,
    private readonly effect: string,
    private readonly actor: { readonly signal: AbortSignal },
  ) {
    this.timeoutMs = tool.timeoutMs ?? steps.session.config.timeouts?.toolMs;
  }

  /** Named for a timeout's message (made only then). */
  get describe(): string {
    return `${this.input.call.name} (step ${this.input.stepId})`;
  }

  // checkCall served a recorded outcome already; a frame recorded since (a late flush) is served the same way.
  async serve(_frame: FrameState): Promise<RunToolOutput> {
    const session = this.steps.session;
    const stepId = this.input.stepId;
    const fed = await session.fedFromJournal(stepId);
    if (fed) session.setFed(stepId, fed);
    return { status: fed?.isError ? "error" : "ok" };
  }

  start(started: NewEntry): Promise<void> {
    return this.steps.start(this.input, started);
  }

  execute(stop: StepStop): unknown {
    return this.steps.execute(this.input.stepId, this.input.call, this.tool, stop);
  }

  record(output: unknown): Promise<RunToolOutput> {
    return this.steps.record(this.input.stepId, output, this.inputDigest, this.effect);
  }

  classify(error: unknown, now: number): AttemptError {
    return toolAttemptError(error, now);
  }

  policy(): RetryPolicy {
    return toolPolicy(this.steps.session.config, this.tool);
  }

  stop(): StepStop {
    this.toolStop ??= this.steps.session.stepStop(this.actor);
    return this.toolStop;
  }
}

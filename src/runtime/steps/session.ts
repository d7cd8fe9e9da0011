import { digestOfRecorded } from "../../core/digest.ts";
import { LoomError, ReplayDivergenceError } from "../../core/errors.ts";
import type { ClaimCheckEnvelope } from "../../events/claimCheck.ts";
import { approvalId } from "../../events/ids.ts";
import type { Journal } from "../../events/spi.ts";
import type { Message, ModelResponse, ToolCall } from "../../events/types.ts";
import type { ToolDescriptor } from "../../models/types.ts";
import type { Budget } from "../../policies/budget.ts";
import type { RunEvent } from "../../projections/events.ts";
import type { RunState } from "../../projections/runState.ts";
import { type Appender, BREATH_MS } from "../base/appender.ts";
import { approvedInputOf, type RecordedOutput, recordedOutput } from "../base/callResult.ts";
import type { AgentLoopConfig, Tool } from "../base/config.ts";
import { Conversation, type Fed, fedFromState, resolveClaimCheck } from "../base/conversation.ts";
import type { HeldLease } from "../base/heldLease.ts";
import type { RunStop, StepStop } from "../base/runStop.ts";
import type { RunTelemetryScope } from "../base/telemetry.ts";
import { RunEventEmitter } from "../streaming/events.ts";
import { RunContext } from "../subruns/runContext.ts";
import type { ApprovalAnswers } from "../subruns/subRunApprovals.ts";
import { RunBudget } from "./budget.ts";
import { LIVE, type Run, type RunMode } from "./run.ts";

export type { RecordedOutput } from "../base/callResult.ts";
export type { Fed } from "../base/conversation.ts";

/** What one `loop.run(...)` is given (see `RunRequest`). */
export interface RunOptions {
  /**
   * The run's id, unique in the journal: a new id starts a run, a known one resumes it (or, for
   * a completed run, returns its recorded answer without calling anything).
   */
  readonly runId: string;
  /** Where the run's steps are journaled and read back from: `openSqliteJournal`, `createJournal`, … */
  readonly journal: Journal;
  /**
   * The user's message (or a whole conversation) that starts the run. Needed only to start: a
   * resume reads it from the journal and ignores this.
   */
  readonly input?: string | readonly Message[];
  /**
   * Aborts the run: it stops at the next step boundary with `AgentInterruptedError` (reason
   * `aborted`); a tool receives it in `ToolContext.signal`. Call `run` again to resume.
   */
  readonly signal?: AbortSignal;
  /**
   * Answers to pending approvals, by step id (`e.run.pendingApprovals[i].stepId`): `true` runs
   * the call, `false` declines it (the model is told), an `ApprovalReply` says more (who and why,
   * an edited input, a run-wide scope). Each answer is journaled once and then
   * served from the journal; an answer for a call asked about before (answered already) is
   * ignored, and for a run that waits for approvals, an answer whose key names no call that waits
   * or waited is refused before anything is journaled (`ApprovalRefusedError`,
   * `approvalUnknownStep`: a typo would otherwise leave the run waiting). A call waiting in a
   * sub-agent (`agentTool`; `pendingApprovals[i].runId` names the child run) is answered here too:
   * by its step id when it waits in one child only, else by `approvalKey(runId, stepId)`; the
   * answer is passed down and journaled on the child's run (`AmbiguousApprovalError` otherwise).
   */
  readonly approvals?: ApprovalAnswers;
  /**
   * Told each event of the run as it happens (its `RunEvent`s): the journaled ones once durable, and
   * the live deltas of the model call in flight. Called synchronously and never awaited, so keep
   * it short; what it throws is ignored. `loop.stream` gives the same events as an async iterable.
   */
  readonly onEvent?: (event: RunEvent) => void;
  /**
   * Limits on the run's model calls, tokens and cost (its sub-agents' usage included), checked
   * before each model call: once one is reached the run interrupts with reason `"budget"` and the
   * figures; run it again with a higher limit to go on. Overrides the loop's `budget`.
   *
   * @example
   * await loop.run({ runId, journal, input, budget: { outputTokens: 20_000 } });
   */
  readonly budget?: Budget;
  /**
   * The clock durable waits read (ms since the epoch; default `Date.now`): when a tool's
   * `ctx.sleep(ms)` wakes, and whether a waiting call is due when the run resumes. Tests pass a
   * fake one to sleep for days in no time (docs/waits.md).
   *
   * @example
   * let now = Date.parse("2026-01-01T00:00:00Z");
   * await loop.run({ runId, journal, now: () => now }).catch(() => {}); // waits 3 days
   * now += 3 * 86_400_000;
   * await loop.run({ runId, journal, now: () => now }); // due: the call wakes
   */
  readonly now?: () => number;
  /**
   * The session whose message the run answers, when `loop.send` started it with a budget: the
   * budget then holds for the whole session (the earlier messages' usage counts).
   *
   * @internal
   */
  readonly session?: string;
}

export type { OlderConversation } from "../base/conversation.ts";

/** What a run's session is made with once the run is held: its stop, lease, mode and context. */
export interface RunHeld {
  readonly stop: RunStop;
  readonly lease: HeldLease | undefined;
  /** Live unless said (a replay of a recording). */
  readonly mode?: RunMode;
  /** `agentTool`'s context when the run is a sub-agent; else the run gets one of its own. */
  readonly context?: RunContext | undefined;
}

/**
 * Everything one `loop.run(...)` call knows beside the statechart, each part with one owner: the
 * run's facts as `prepare` made them (`Run`, read-only), its journal writer and the fold it keeps
 * current (`Appender`), its conversation (`Conversation`), its stop (`RunStop`), its budget and
 * its events. The runtime's actors share it; the machine never sees it.
 */
export class RunSession {
  /** The run's events: what the appender makes durable, folded, and the live deltas (`events.emitLive`). */
  readonly events: RunEventEmitter;
  /**
   * The run's context (`ToolContext.run`): its depth, parent and children, and what its sub-agents
   * share with it. `agentTool`'s when it started this run as a sub-agent, else a new one.
   */
  readonly run: RunContext;
  /** The run's journal writer: opened once, by `prepare`, when it has read the journal ({@link open}). */
  private opened: Appender | undefined;
  /** The run as `prepare` made it: read-only facts, set once ({@link begin}). */
  private made: Run | undefined;
  /** The run's telemetry in this process (`config.telemetry`), once prepare started it ({@link trace}). */
  private traced: RunTelemetryScope | undefined;
  /** The run's lease, checked by the local clock before each effect starts. */
  readonly lease: HeldLease | undefined;
  /** How the run treats its record: a run of this code, or a replay of a recording. */
  readonly mode: RunMode;
  /** What stops the run and its steps: `options.signal` is its signal. */
  readonly stop: RunStop;
  /**
   * Where the run reads its own history (its state, archived outputs, older messages): the
   * journal, as the run's mode reads it (see `RunMode.history`). Appends, the run's log and every
   * reader go through the journal as it is.
   */
  get history(): Journal {
    this.ownHistory ??= this.mode.history(this.options.journal);
    return this.ownHistory;
  }
  private ownHistory: Journal | undefined;

  /** The run's journal writer (once `prepare` opened it: the actors that use it run after). */
  get appender(): Appender {
    if (this.opened === undefined) throw notYet(this.options.runId, "its journal writer");
    return this.opened;
  }

  /** The journal writer if `prepare` opened it yet: what a stop told earlier, or a run's last flush, finds. */
  get openedAppender(): Appender | undefined {
    return this.opened;
  }

  /** Opens the run's journal writer (once): its appends are folded into the run's events from here on. */
  open(appender: Appender): void {
    if (this.opened !== undefined) throw twice(this.options.runId, "its journal writer");
    this.opened = appender;
    this.events.attach(appender);
  }

  /** The run's facts if `prepare` made them yet: what the run's end reads however far it got. */
  get prepared(): Run | undefined {
    return this.made;
  }

  /**
   * Whether `prepare` got the run ready: the chart walks it (a failure from here on may be
   * journaled: `failedEntry`). Set once, by `prepare`'s last step ({@link ready}).
   */
  get walks(): boolean {
    return this.walking;
  }
  private walking = false;

  /** `prepare` got the run ready: the chart walks it from here on. */
  ready(): void {
    this.walking = true;
  }

  /** The run's facts (the actors that read them run once `prepare` made them). */
  get facts(): Run {
    if (this.made === undefined) throw notYet(this.options.runId, "its facts");
    return this.made;
  }

  /** Sets the run's facts, once: `prepare` made them and nothing changes them after. */
  begin(run: Run): void {
    if (this.made !== undefined) throw twice(this.options.runId, "its facts");
    this.made = run;
  }

  /** The run's telemetry scope, once prepare started it: ended with the run, however it ends. */
  get telemetry(): RunTelemetryScope | undefined {
    return this.traced;
  }

  /** Keeps the run's telemetry scope (once), to end it with the run. */
  trace(scope: RunTelemetryScope): void {
    if (this.traced !== undefined) throw twice(this.options.runId, "its telemetry");
    this.traced = scope;
  }

  /** The run's deadline (ms since the epoch) as journaled, when the loop has `timeouts.runMs`. */
  get deadlineAt(): number | undefined {
    return this.facts.deadlineAt;
  }

  /** What the model is told it can call (the same list on every call of the run). */
  get toolDescriptors(): readonly ToolDescriptor[] {
    return this.facts.toolDescriptors;
  }

  /** The run's tools by name: the loop's, plus its tool sources'. */
  get tools(): Readonly<Record<string, Tool>> {
    return this.facts.tools;
  }

  /** The run's conversation: its messages, turn starts, prompt digest and what each call fed the model. */
  readonly conversation: Conversation;
  /** When the run last let the event loop run other work (see {@link breathe}). */
  private lastBreath = performance.now();
  /** The run's budget: its usage so far and the check made before each model call. */
  readonly budget: RunBudget;

  constructor(
    readonly config: AgentLoopConfig,
    readonly options: RunOptions,
    held: RunHeld,
  ) {
    this.stop = held.stop;
    this.lease = held.lease;
    this.mode = held.mode ?? LIVE;
    this.run = held.context ?? new RunContext(options.runId, 0, undefined, undefined, config.id);
    this.events = new RunEventEmitter(options.journal.store, options.runId, options.onEvent);
    this.conversation = new Conversation(config.id);
    const budget = options.budget ?? config.budget;
    this.budget = new RunBudget(budget, options.journal, options.runId, config.model.id, options.session);
  }

  /** The run's clock for durable waits (`RunOptions.now`, else `Date.now`). */
  now(): number {
    return this.options.now?.() ?? Date.now();
  }

  get state(): RunState {
    return this.appender.state;
  }

  get loopId(): string {
    return this.config.id;
  }

  /** Records that the model was called with the conversation so far (under `digest`), and what it answered. */
  modelAnswered(digest: string, response: ModelResponse): void {
    this.conversation.answered(digest, response);
    this.budget.answered(response);
  }

  /**
   * Lets the event loop run other work (timers, I/O: a worker's lease renewal) once the run has
   * held it for {@link BREATH_MS}. Stores and tools may answer synchronously under their promises,
   * so a response with thousands of calls would otherwise run in one stretch of microtasks.
   * Undefined when there is no need yet: then the caller goes on without waiting.
   *
   * @example
   * const breath = session.breathe();
   * if (breath !== undefined) await breath;
   */
  breathe(): Promise<void> | undefined {
    if (performance.now() - this.lastBreath < BREATH_MS) return undefined; // no promise made: most calls
    return new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.lastBreath = performance.now();
    });
  }

  /**
   * What stops a step's effect: the run's signal (`options.signal`) and its actor (what the actor's
   * creator was given, or a plain call's stop), as `AbortSignal.any` would combine them; its
   * AbortSignal is made only if the effect reads it. `durableStep` releases it once the effect is done.
   */
  stepStop(actor: StepStop | { readonly signal: AbortSignal }): StepStop {
    return this.stop.step(actor);
  }

  /** The effect of a step is done with its stop (see {@link stepStop}). */
  releaseStepStop(stop: StepStop): void {
    this.stop.release(stop);
  }

  /** The run ended: nothing of it listens to the run's signal any more. */
  dispose(): void {
    this.stop.releaseSteps();
  }

  /** Keeps what the call at `stepId` fed the model (the conversation's, until its turn's results join it). */
  setFed(stepId: string, fed: Fed): void {
    this.conversation.feed(stepId, fed);
  }

  /** What the call at `stepId` fed the model, until its turn's results are in the conversation. */
  getFed(stepId: string): Fed | undefined {
    return this.conversation.fedFor(stepId);
  }

  /**
   * What the model was fed for a call that the journal shows settled, or undefined if it is not
   * settled yet. A claim-checked output is resolved through the blob store, digest verified.
   */
  fedFromJournal(stepId: string): Promise<Fed | undefined> {
    return fedFromState(this.state, stepId, (id, envelope) => this.resolveOutput(id, envelope));
  }

  /** Whether the journal holds anything of the call at `stepId` (a frame, or its settlement): else {@link serveCall} serves nothing. */
  holdsCall(stepId: string): boolean {
    const state = this.state;
    return state.frames[stepId] !== undefined || state.settled[stepId] !== undefined;
  }

  /**
   * Serves a tool call from the journal when it recorded the call's outcome: checks the frame
   * against this code (`judgeToolFrame`), and keeps what the model was fed. Returns it, or
   * undefined when the call has not ended yet.
   */
  async serveCall(stepId: string, call: ToolCall): Promise<Fed | undefined> {
    this.judgeToolFrame(stepId, call);
    const fed = await this.fedFromJournal(stepId);
    if (fed) this.setFed(stepId, fed);
    return fed;
  }

  /**
   * The replay-divergence guard for a tool call: if the journal holds a frame at `stepId`, this
   * code must produce the same frame (a configured tool of that name, the same input digest).
   */
  judgeToolFrame(stepId: string, call: ToolCall): void {
    const frame = this.state.frames[stepId];
    if (!frame) return;
    const known = Object.hasOwn(this.tools, call.name);
    if (!known || frame.effect !== `tool:${call.name}`) {
      throw this.divergence(
        stepId,
        `a frame of effect ${frame.effect}, but this code has ${known ? `tool:${call.name}` : `no tool "${call.name}"`}`,
      );
    }
    // A call approved with a changed input ran with it: its frame records that input's digest.
    const approved = approvedInputOf(this.state.decisions[approvalId(stepId)]?.choice);
    if (frame.inputDigest !== (approved?.inputDigest ?? digestOfRecorded(call.input).digest))
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

  /** What the model was fed for a claim-checked output: the envelope's blob, read back verified. */
  resolveOutput(stepId: string, envelope: ClaimCheckEnvelope): Promise<unknown> {
    const blobs = this.config.claimCheck?.blobs ?? this.options.journal.blobs;
    return resolveClaimCheck(envelope, blobs, `run ${this.options.runId} step ${stepId}`);
  }

  /**
   * Prepares a tool's live output for the journal: its JSON round trip (what a resume reads back),
   * claim-checked into the blob store when its canonical JSON exceeds the threshold (then a promise;
   * else made at once).
   */
  recordOutput(output: unknown): RecordedOutput | Promise<RecordedOutput> {
    return recordedOutput(output, this.config.claimCheck);
  }
}

/** Internal: a part of the run read before `prepare` made it. */
function notYet(runId: string, what: string): LoomError {
  return new LoomError(
    "internal",
    `internal: run ${runId} read ${what} before prepare made it; read it only from the actors that run after prepare`,
  );
}

/** Internal: a part of the run made a second time. */
function twice(runId: string, what: string): LoomError {
  return new LoomError("internal", `internal: run ${runId} made ${what} a second time; prepare makes it once`);
}

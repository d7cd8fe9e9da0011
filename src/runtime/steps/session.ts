import { digestOfRecorded } from "../../core/digest.ts";
import { ReplayDivergenceError } from "../../core/errors.ts";
import type { ClaimCheckEnvelope } from "../../events/claimCheck.ts";
import { toolStepId } from "../../events/ids.ts";
import { originalsView } from "../../events/redaction/redactedOriginals.ts";
import type { Journal } from "../../events/spi.ts";
import type { Message, ModelResponse, ToolCall } from "../../events/types.ts";
import type { ToolDescriptor } from "../../models/types.ts";
import type { Budget } from "../../policies/budget.ts";
import type { RunEvent } from "../../projections/events.ts";
import type { RunState } from "../../projections/runState.ts";
import type { ToolCallLogMode } from "../../projections/types.ts";
import type { Appender } from "../base/appender.ts";
import { type RecordedOutput, recordedOutput } from "../base/callResult.ts";
import type { AgentLoopConfig, Tool } from "../base/config.ts";
import {
  assistantMessage,
  chainedPromptDigest,
  conversationStart,
  type Fed,
  fedFromState,
  resolveClaimCheck,
  toolResultMessage,
} from "../base/conversation.ts";
import type { HeldLease } from "../base/heldLease.ts";
import type { SnapshotSchedule } from "../base/snapshots.ts";
import type { RunTelemetryScope } from "../base/telemetry.ts";
import { RunEventEmitter } from "../streaming/events.ts";
import { RunContext } from "../subruns/runContext.ts";
import { RunBudget } from "./budget.ts";
import { toolDescriptors } from "./builtins.ts";
import { StepSignals, type StepStop } from "./stepSignals.ts";

export type { RecordedOutput } from "../base/callResult.ts";
export type { Fed } from "../base/conversation.ts";

/** The longest the loop holds the event loop between two turns of it, in ms (about). */
const BREATH_MS = 10;

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
   * the call, `false` declines it (the model is told). Each answer is journaled once and then
   * served from the journal; an answer for a call asked about before (answered already) is
   * ignored, and for a run that waits for approvals, an answer whose key names no call that waits
   * or waited is refused before anything is journaled (`ApprovalRefusedError`,
   * `approvalUnknownStep`: a typo would otherwise leave the run waiting). A call waiting in a
   * sub-agent (`agentTool`; `pendingApprovals[i].runId` names the child run) is answered here too:
   * by its step id when it waits in one child only, else by `approvalKey(runId, stepId)`; the
   * answer is passed down and journaled on the child's run (`AmbiguousApprovalError` otherwise).
   */
  readonly approvals?: Readonly<Record<string, boolean>>;
  /**
   * Told each event of the run as it happens (DESIGN §7.1): the journaled ones once durable, and
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

/** The conversation before a compact resume's tail, and where each of its turns starts in it. */
export interface OlderConversation {
  readonly messages: Message[];
  readonly turnStarts: readonly number[];
}

/**
 * Everything one `loop.run(...)` call knows beside the statechart: the folded journal (kept
 * current by the appender), the conversation rebuilt from it, what each call fed the model, and
 * the chained prompt digest. The runtime's actors share it; the machine never sees it.
 */
export class RunSession {
  /** The run's events: what the appender makes durable, folded, and the live deltas (`events.emitLive`). */
  readonly events: RunEventEmitter;
  /**
   * The run's context (`ToolContext.run`): its depth, parent and children, and what its sub-agents
   * share with it. `agentTool`'s when it started this run as a sub-agent, else a new one.
   */
  readonly run: RunContext;
  private current!: Appender;
  get appender(): Appender {
    return this.current;
  }
  /** Set once the journal is read (`prepare`); its appends are folded into the run's events. */
  set appender(appender: Appender) {
    this.current = appender;
    this.events.attach(appender);
  }
  mode: ToolCallLogMode = "full";
  /**
   * A replay of a recording (`loom inspect`): every step is served from the journal without
   * comparing prompt digests or the loop's definition, which the stand-in loop cannot reproduce.
   */
  replaying = false;
  /**
   * Where the run reads its own history (its state, archived outputs, older messages): the journal,
   * with the originals of redacted payloads restored where it keeps them, so the model is fed what
   * it was fed live. Appends, the run's log and every reader go through the journal as it is.
   */
  get history(): Journal {
    if (this.replaying) return this.options.journal;
    this.ownHistory ??= originalsView(this.options.journal);
    return this.ownHistory;
  }
  private ownHistory: Journal | undefined;
  /** `prepare` got the run ready: the chart walks it (a failure from here on may be journaled: `failedEntry`). */
  prepared = false;
  /** The run's lease, checked by the local clock before each effect starts (set once the run is held). */
  lease: HeldLease | undefined;
  /** Writes the run's snapshots as it goes (`config.snapshots`), once prepare read the journal. */
  snapshots: SnapshotSchedule | undefined;
  /** The run's telemetry in this process (`config.telemetry`), once prepare started it. */
  telemetry: RunTelemetryScope | undefined;
  /** Awaited before each model step of a replay, to watch it step by step. */
  pace: (() => Promise<unknown>) | undefined;
  /** The run's deadline (ms since the epoch) as journaled, when the loop has `timeouts.runMs`. */
  deadlineAt: number | undefined;
  /** The conversation so far (after a compact resume, its tail only until {@link conversation} reads the rest). */
  messages: Message[] = [];
  /** Where each answered turn starts in `messages`: the index of its assistant message (context policies read it). */
  turnStarts: number[] = [];
  /** What the next model call is sent when a context policy made it; else `messages`. */
  prompt: readonly Message[] | undefined;
  /** Chained prompt digest up to the last model call, and how many messages it covers. */
  promptDigest = "";
  private digested = 0;
  /**
   * After a compact resume ({@link resumeAt}): reads the conversation before its tail from the
   * journal, once, when the model is first asked (a served turn needs only the tail's digest).
   */
  private older: (() => Promise<OlderConversation>) | undefined;
  private readonly fed = new Map<string, Fed>();
  private readonly toolResultsPushed = new Set<number>();
  /** When the run last let the event loop run other work (see {@link breathe}). */
  private lastBreath = performance.now();
  /** Links each step's signal to the run's (made at the first step: after the run's own listeners). */
  private steps: StepSignals | undefined;
  /** The run's budget: its usage so far and the check made before each model call. */
  readonly budget: RunBudget;
  /** What the model is told it can call (the same list on every call of the run; tool sources' added in prepare). */
  toolDescriptors: readonly ToolDescriptor[];
  /** The run's tools by name: the loop's, plus its tool sources' once prepare resolved them (toolSources.ts). */
  tools: Readonly<Record<string, Tool>>;

  constructor(
    readonly config: AgentLoopConfig,
    readonly options: RunOptions,
    run?: RunContext,
  ) {
    this.run = run ?? new RunContext(options.runId, 0, undefined, undefined, config.id);
    this.toolDescriptors = toolDescriptors(config);
    this.events = new RunEventEmitter(options.journal.store, options.runId, options.onEvent);
    this.tools = config.tools ?? {};
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

  /** The first messages of the conversation: the system prompt and the run's input. */
  startConversation(input: string | readonly Message[]): void {
    this.messages.push(...conversationStart(this.config, input));
  }

  /**
   * Starts the conversation at a recorded turn instead of the run's start (a compact resume): the
   * model's response at the turn before (`response`, called with the chained digest `promptDigest`)
   * is the tail's first message, and `older` reads the messages before it when the model is asked.
   */
  resumeAt(promptDigest: string, response: ModelResponse, older: () => Promise<OlderConversation>): void {
    this.promptDigest = promptDigest;
    this.messages = [assistantMessage(response)];
    this.turnStarts = [0]; // the tail's turn; the older turns' starts come with their messages
    this.digested = 0;
    this.older = older;
  }

  /**
   * The whole conversation, as the model is sent it: after a compact resume, the messages before
   * its tail are read from the journal the first time (and kept: the model is sent them every turn).
   *
   * @example
   * const messages = await session.conversation(); // system, input, then every turn's messages
   */
  async conversation(): Promise<readonly Message[]> {
    const older = this.older;
    if (older !== undefined) {
      this.older = undefined;
      const before = await older();
      const shift = before.messages.length;
      this.messages = before.messages.concat(this.messages);
      this.turnStarts = before.turnStarts.concat(this.turnStarts.map((at) => at + shift));
      this.digested += shift;
    }
    return this.messages;
  }

  /** The whole conversation when it needs no reading first (see {@link conversation}), else undefined. */
  conversationAtHand(): readonly Message[] | undefined {
    return this.older === undefined ? this.messages : undefined;
  }

  /** The digest a model call at this point is journaled with: chained, so hashing stays linear. */
  nextPromptDigest(): string {
    return chainedPromptDigest(this.promptDigest, this.messages.slice(this.digested));
  }

  /** Records that the model was called with the conversation so far, and what it answered. */
  modelAnswered(digest: string, response: ModelResponse): void {
    this.promptDigest = digest;
    this.digested = this.messages.length;
    this.turnStarts.push(this.messages.length);
    this.messages.push(assistantMessage(response));
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
    this.steps ??= new StepSignals(this.options.signal);
    return this.steps.link(actor);
  }

  /** The effect of a step is done with its stop (see {@link stepStop}). */
  releaseStepStop(stop: StepStop): void {
    this.steps?.release(stop);
  }

  /** The run ended: nothing of it listens to the run's signal any more. */
  dispose(): void {
    this.steps?.dispose();
  }

  setFed(stepId: string, fed: Fed): void {
    this.fed.set(stepId, fed);
  }

  /** What the call at `stepId` fed the model, until its turn's results are in the conversation ({@link pushToolResults}). */
  getFed(stepId: string): Fed | undefined {
    return this.fed.get(stepId);
  }

  /** Adds turn `turn`'s tool results to the conversation, in call order (once). */
  pushToolResults(turn: number, response: ModelResponse): void {
    if (this.toolResultsPushed.has(turn)) return;
    this.toolResultsPushed.add(turn);
    const calls = response.toolCalls;
    for (let index = 0; index < calls.length; index++) {
      const stepId = toolStepId(this.loopId, turn, index);
      this.messages.push(toolResultMessage(calls[index] as ToolCall, this.fed.get(stepId)));
      this.fed.delete(stepId); // in the conversation now, and never asked again: not kept for the rest of the run
    }
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

import {
  DECISION_SOURCES,
  modelIdDecisionId,
  parseFrameId,
  runsBelowPrefix,
  sessionBudgetId,
  sessionMessageOf,
  sessionRunId,
} from "../../events/ids.ts";
import type { Journal } from "../../events/spi.ts";
import type { ModelResponse, NewEntry } from "../../events/types.ts";
import {
  addUsage,
  type Budget,
  type BudgetBreach,
  type BudgetUsage,
  budgetBreach,
  costOf,
  NO_USAGE,
  type PriceTable,
  remainingBudget,
} from "../../policies/budget.ts";
import type { RunState } from "../../projections/runState.ts";
import { type CallTokens, callTokens, modelCallTokens } from "../../projections/usage.ts";
import { foldRun, hydrateArchived } from "../base/readers.ts";

const MODEL_ID_SOURCE = DECISION_SOURCES.modelId;
/** The source of context decisions (actors.ts): a summary's model calls are journaled in them. */
const CONTEXT_SOURCE = DECISION_SOURCES.context;
/** The source of `<loop>#session`: a session's usage before the message a run answers. */
const SESSION_SOURCE = DECISION_SOURCES.sessionBudget;

/**
 * How the sub-agents one model response started share the run's budget, as journaled in
 * `<loop>#turn:<i>:budget`: the run's usage before any of them ran, and their step ids in call
 * order. Each one's share is `shareBudget(budget, used, stepIds.length, index)`: the same figures
 * on every resume, and with a raised budget, a larger share for each.
 */
export interface BudgetShares {
  readonly used: BudgetUsage;
  readonly stepIds: readonly string[];
}

/**
 * A run's budget in this process: the usage of its own model calls (summed as they are answered,
 * served ones included), of its sub-agent runs (`<runId>/…`, folded from the journal when a
 * sub-agent may have run since the last look) and, for a session's message sent with a budget, of
 * the session's earlier messages (journaled once with the run's start), checked before each model
 * call by the pure `budgetBreach`. Nothing is kept outside the journal: a resume sums the same
 * figures again, and the shares its sub-agents were given are journaled decisions it serves.
 */
export class RunBudget {
  #own: BudgetUsage = NO_USAGE;
  #below: BudgetUsage | undefined;
  /** The session's earlier messages (their runs and their sub-agents'), for a message sent with a budget. */
  #before: BudgetUsage = NO_USAGE;
  /** Each turn's sub-agent shares while they are decided: siblings started together wait for one decision. */
  readonly #shares = new Map<number, Promise<BudgetShares>>();
  /** The last model call the check let through (its retries are not checked again; turns only go up). */
  #admitted = -1;
  /** The last turn whose context decision's model calls are counted. */
  #asked = -1;

  constructor(
    readonly budget: Budget | undefined,
    private readonly journal: Journal,
    private readonly runId: string,
    private readonly modelId: string | undefined,
    /** The session the run is a message of, when `loop.send` started it: its budget holds for the whole session. */
    private readonly sessionId?: string,
  ) {}

  /** Whether a budget applies to the run: without one, nothing is summed or read. */
  get active(): boolean {
    return this.budget !== undefined;
  }

  /** What a new budgeted run journals with its start: the model id its cost is priced with (for a parent's sum). */
  startEntries(loopId: string): NewEntry[] {
    if (this.budget?.prices === undefined || this.modelId === undefined) return [];
    return [
      {
        type: "decision.recorded",
        data: { decisionId: modelIdDecisionId(loopId), source: MODEL_ID_SOURCE, choice: { modelId: this.modelId } },
      },
    ];
  }

  /**
   * Reads what the budget counts beside the run's own calls and its sub-agents: for the run of a
   * session's message sent with a budget, the session's earlier messages. A new run sums them and
   * returns the decision that records the sum, to journal with its start; a resume reads it back,
   * so the figure never changes.
   */
  async prepare(state: RunState, loopId: string): Promise<NewEntry[]> {
    if (this.budget === undefined) return [];
    const recorded = state.decisions[sessionBudgetId(loopId)];
    if (recorded?.source === SESSION_SOURCE) {
      this.#before = usageOfRecord((recorded.choice as { used?: unknown } | null)?.used);
      return [];
    }
    if (state.status !== "new" || this.sessionId === undefined) return [];
    const { journal, runId, modelId, budget } = this;
    this.#before = await sessionUsageBefore(journal, this.sessionId, runId, modelId, budget.prices);
    const choice = { sessionId: this.sessionId, used: this.#before };
    return [
      { type: "decision.recorded", data: { decisionId: sessionBudgetId(loopId), source: SESSION_SOURCE, choice } },
    ];
  }

  /** Counts one model call's response (its journaled usage) toward the run's own figures. */
  answered(response: ModelResponse): void {
    if (this.budget === undefined) return;
    this.#own = addUsage(this.#own, usageOfCall(callTokens(response.usage), this.modelId, this.budget.prices));
  }

  /** Counts the model calls a context policy made (journaled in its decision) toward the run's own figures. */
  askedForContext(
    turn: number,
    asked: { readonly modelCalls: number; readonly inputTokens: number; readonly outputTokens: number },
  ): void {
    if (this.budget === undefined || turn <= this.#asked) return; // a retried model call reads its decision again
    this.#asked = turn;
    this.#own = addUsage(this.#own, pricedAsk(asked, this.modelId, this.budget.prices));
  }

  /** A sub-agent may have run since the last look: its usage is read again before the next check. */
  subAgentsRan(): void {
    this.#below = undefined;
  }

  /** The run's usage, its sub-agents' included (and for a session's message, the earlier messages'). */
  async used(): Promise<BudgetUsage> {
    this.#below ??= await subRunsUsage(this.journal, this.runId, this.modelId, this.budget?.prices);
    return addUsage(addUsage(this.#before, this.#own), this.#below);
  }

  /**
   * The limit reached before model call `turn`, or undefined (the call may be made). A call let
   * through is not judged again when its attempt failed and is tried again: what its own context
   * decision asked the model is counted after the check, as it is when a resume makes the call.
   */
  async check(turn: number): Promise<BudgetBreach | undefined> {
    if (this.budget === undefined || turn <= this.#admitted) return undefined;
    const breach = budgetBreach(await this.used(), this.budget);
    if (breach === undefined) this.#admitted = turn;
    return breach;
  }

  /** What is left of the budget: what the run has used taken off, or undefined without one. */
  async remaining(): Promise<Budget | undefined> {
    if (this.budget === undefined) return undefined;
    return remainingBudget(this.budget, await this.used());
  }

  /**
   * The shares of turn `turn`'s sub-agents: `decide` is called once however many of them ask at
   * the same time (and again only if it failed).
   */
  sharesOf(turn: number, decide: () => Promise<BudgetShares>): Promise<BudgetShares> {
    let shares = this.#shares.get(turn);
    if (shares === undefined) {
      shares = decide();
      this.#shares.set(turn, shares);
      shares.catch(() => this.#shares.delete(turn));
    }
    return shares;
  }
}

/** One model call's figures: a call, the tokens its response's `usage` reported, their cost. */
function usageOfCall(tokens: CallTokens | undefined, modelId: string | undefined, prices: PriceTable | undefined) {
  const counted = tokens ?? { inputTokens: 0, outputTokens: 0 };
  return { modelCalls: 1, ...counted, cost: costOf(counted, modelId, prices) };
}

/** A context decision's `asked` figures, priced. */
function pricedAsk(
  asked: { readonly modelCalls?: unknown; readonly inputTokens?: unknown; readonly outputTokens?: unknown },
  modelId: string | undefined,
  prices: PriceTable | undefined,
): BudgetUsage {
  const tokens = { inputTokens: numberOr0(asked.inputTokens), outputTokens: numberOr0(asked.outputTokens) };
  return { modelCalls: numberOr0(asked.modelCalls), ...tokens, cost: costOf(tokens, modelId, prices) };
}

const numberOr0 = (n: unknown): number => (typeof n === "number" && Number.isFinite(n) ? n : 0);

/**
 * The usage a run's folded journal records: each completed model frame a call, with the usage it
 * recorded, priced by the model id the run journaled (else `fallbackModelId`). A model frame moved
 * to the archive counts its tokens once its output is read back (`hydrateArchived`), as a budget
 * reads a sub-agent's or an earlier message's run; before that it counts as a call without tokens.
 *
 * @example
 * const used = usageOfRun(await foldRun(journal, "r-1"), "gpt-4o-mini", prices);
 */
export function usageOfRun(state: RunState, fallbackModelId: string | undefined, prices?: PriceTable): BudgetUsage {
  const recorded = Object.values(state.decisions).find((d) => d.source === MODEL_ID_SOURCE)?.choice as
    | { modelId?: unknown }
    | undefined;
  const modelId = typeof recorded?.modelId === "string" ? recorded.modelId : fallbackModelId;
  let used = NO_USAGE;
  for (const decision of Object.values(state.decisions)) {
    const asked = (decision.choice as { asked?: unknown } | null)?.asked;
    if (decision.source === CONTEXT_SOURCE && typeof asked === "object" && asked !== null)
      used = addUsage(used, pricedAsk(asked, modelId, prices));
  }
  for (const tokens of modelCallTokens(state)) {
    used = addUsage(used, usageOfCall(typeof tokens === "string" ? undefined : tokens, modelId, prices));
  }
  return used;
}

/** The usage of every sub-agent run below `runId` (`<runId>/…`, at any depth), read from the journal. */
async function subRunsUsage(
  journal: Journal,
  runId: string,
  modelId: string | undefined,
  prices: PriceTable | undefined,
): Promise<BudgetUsage> {
  const prefix = runsBelowPrefix(runId);
  let used = NO_USAGE;
  for (const run of await journal.store.listRuns({ prefix })) {
    if (!run.runId.startsWith(prefix)) continue; // a store may ignore the prefix
    used = addUsage(
      used,
      usageOfRun(await withModelOutputs(journal, await foldRun(journal, run.runId)), modelId, prices),
    );
  }
  return used;
}

/** `state` with the outputs of its archived model frames read back (their usage), when it has any. */
async function withModelOutputs(journal: Journal, state: RunState): Promise<RunState> {
  const archivedModel = Object.values(state.frames).some(
    (f) => f.archived !== undefined && !("output" in f) && parseFrameId(f.frameId)?.kind === "model",
  );
  return archivedModel ? hydrateArchived(journal, state, { only: "model" }) : state;
}

/**
 * The usage of a session's messages before the one `runId` answers (`<sessionId>/<n>`): each
 * earlier message's run and the sub-agents below it, read back to the last one that recorded the
 * session's usage before it (so each message reads one run or few, not the whole session).
 */
async function sessionUsageBefore(
  journal: Journal,
  sessionId: string,
  runId: string,
  modelId: string | undefined,
  prices: PriceTable | undefined,
): Promise<BudgetUsage> {
  let used = NO_USAGE;
  for (let k = (sessionMessageOf(runId, sessionId) ?? 0) - 1; k >= 0; k--) {
    const message = sessionRunId(sessionId, k);
    const state = await withModelOutputs(journal, await foldRun(journal, message));
    used = addUsage(
      addUsage(used, usageOfRun(state, modelId, prices)),
      await subRunsUsage(journal, message, modelId, prices),
    );
    const recorded = state.decisions[sessionBudgetId(state.loopId ?? "")];
    if (recorded?.source === SESSION_SOURCE) {
      return addUsage(used, usageOfRecord((recorded.choice as { used?: unknown } | null)?.used));
    }
  }
  return used;
}

/** A usage as a decision recorded it (figures that are not numbers count 0). */
export function usageOfRecord(recorded: unknown): BudgetUsage {
  const u = (recorded ?? {}) as Partial<Record<keyof BudgetUsage, unknown>>;
  return {
    modelCalls: numberOr0(u.modelCalls),
    inputTokens: numberOr0(u.inputTokens),
    outputTokens: numberOr0(u.outputTokens),
    cost: numberOr0(u.cost),
  };
}

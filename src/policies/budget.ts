/**
 * Budgets as pure decisions: what a run (its sub-agents included) has used, priced by
 * a table the program gives, against the limits it was given. No clock and no I/O here: the
 * runtime passes the usage it folded from the journal (the `usage` model frames recorded) and
 * journals the interruption this decides.
 */

/** What one model costs, in the program's currency, per million tokens. */
export interface ModelPrice {
  readonly inputPerMillion: number;
  readonly outputPerMillion: number;
}

/**
 * Prices by model id (`Model.id`, e.g. `"gpt-4o-mini"`): what a `cost` budget is counted with. A
 * model with no price costs nothing, so a `cost` budget with no price for the run's model never stops it.
 *
 * @example
 * const prices: PriceTable = { "gpt-4o-mini": { inputPerMillion: 0.15, outputPerMillion: 0.6 } };
 */
export type PriceTable = Readonly<Record<string, ModelPrice>>;

/**
 * Limits on a run (and on the sub-agents it starts, whose usage counts toward it). Each limit is
 * what may be spent: once a figure reaches its limit, the next model call is not made and the run
 * interrupts with reason `"budget"` (resumable with a higher limit). Absent limits do not apply.
 *
 * @example
 * await loop.run({ runId, journal, input, budget: { modelCalls: 20, inputTokens: 200_000, cost: 0.5, prices } });
 */
export interface Budget {
  readonly modelCalls?: number;
  /** Prompt tokens, as the provider reported them in each response's `usage`. */
  readonly inputTokens?: number;
  readonly outputTokens?: number;
  /** In the currency of `prices`. */
  readonly cost?: number;
  /** What `cost` is counted with. */
  readonly prices?: PriceTable;
}

/** The figures a budget limits: what a run and its sub-agents used so far. */
export interface BudgetUsage {
  readonly modelCalls: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cost: number;
}

/** One of the limits of a {@link Budget}. */
export type BudgetLimit = "modelCalls" | "inputTokens" | "outputTokens" | "cost";

/**
 * A budget reached: which limit, the usage and the budget's limits at that point. It is the
 * `detail` of the run's `run.interrupted` (reason `"budget"`), so the CLI and viewer show it.
 */
export interface BudgetBreach {
  readonly limit: BudgetLimit;
  readonly used: BudgetUsage;
  readonly limits: Partial<Record<BudgetLimit, number>>;
}

/** The usage of nothing: no call made. */
export const NO_USAGE: BudgetUsage = Object.freeze({ modelCalls: 0, inputTokens: 0, outputTokens: 0, cost: 0 });

const LIMITS: readonly BudgetLimit[] = ["modelCalls", "inputTokens", "outputTokens", "cost"];

/**
 * The cost of `inputTokens` and `outputTokens` of model `modelId`, by `prices` (0 without a price).
 *
 * @example
 * costOf({ inputTokens: 1_000_000, outputTokens: 0 }, "m", { m: { inputPerMillion: 2, outputPerMillion: 8 } }); // 2
 */
export function costOf(
  tokens: { readonly inputTokens: number; readonly outputTokens: number },
  modelId: string | undefined,
  prices: PriceTable | undefined,
): number {
  const price = modelId === undefined ? undefined : prices?.[modelId];
  if (price === undefined) return 0;
  return (tokens.inputTokens * price.inputPerMillion + tokens.outputTokens * price.outputPerMillion) / 1_000_000;
}

/**
 * Two usages added up (a run's own and its sub-agents').
 *
 * @example
 * addUsage(NO_USAGE, { modelCalls: 1, inputTokens: 10, outputTokens: 2, cost: 0 }).modelCalls; // 1
 */
export function addUsage(a: BudgetUsage, b: BudgetUsage): BudgetUsage {
  return {
    modelCalls: a.modelCalls + b.modelCalls,
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cost: a.cost + b.cost,
  };
}

/**
 * Whether one more model call may be made: the first limit of `budget` that `used` has reached
 * (in the order modelCalls, inputTokens, outputTokens, cost), or undefined. Pure.
 *
 * @example
 * budgetBreach({ modelCalls: 3, inputTokens: 0, outputTokens: 0, cost: 0 }, { modelCalls: 3 })?.limit; // "modelCalls"
 */
export function budgetBreach(used: BudgetUsage, budget: Budget | undefined): BudgetBreach | undefined {
  if (budget === undefined) return undefined;
  const limits = limitsOf(budget);
  for (const limit of LIMITS) {
    const max = limits[limit];
    if (max !== undefined && used[limit] >= max) return { limit, used, limits };
  }
  return undefined;
}

/**
 * What is left of `budget` once `used` is spent (sub-agents started together share it: see
 * {@link shareBudget}). Prices are kept.
 *
 * @example
 * remainingBudget({ modelCalls: 10 }, { modelCalls: 4, inputTokens: 0, outputTokens: 0, cost: 0 }); // { modelCalls: 6 }
 */
export function remainingBudget(budget: Budget, used: BudgetUsage): Budget {
  const left: { -readonly [K in keyof Budget]: Budget[K] } = {};
  for (const limit of LIMITS) {
    const max = budget[limit];
    if (max !== undefined) left[limit] = Math.max(0, max - used[limit]);
  }
  if (budget.prices !== undefined) left.prices = budget.prices;
  return left;
}

/**
 * One of `count` equal shares of what is left of `budget` once `used` is spent: the budget of one
 * of the sub-agents a model response starts together, so that together they never spend past the
 * limits. Whole figures (calls, tokens) are split in whole numbers, the later shares taking the
 * remainder; the shares add up to what is left, never more. Prices are kept. Pure.
 *
 * @example
 * [0, 1, 2, 3].map((i) => shareBudget({ modelCalls: 6 }, { ...NO_USAGE, modelCalls: 1 }, 4, i).modelCalls); // [1, 1, 1, 2]
 */
export function shareBudget(budget: Budget, used: BudgetUsage, count: number, index: number): Budget {
  const left = remainingBudget(budget, used);
  if (count <= 1) return left;
  const share: { -readonly [K in keyof Budget]: Budget[K] } = {};
  for (const limit of LIMITS) {
    const rest = left[limit];
    if (rest === undefined) continue;
    share[limit] =
      limit === "cost" ? rest / count : Math.floor((rest * (index + 1)) / count) - Math.floor((rest * index) / count);
  }
  if (budget.prices !== undefined) share.prices = budget.prices;
  return share;
}

/** The limits a budget sets, without its prices (what an interruption journals). */
function limitsOf(budget: Budget): Partial<Record<BudgetLimit, number>> {
  const limits: Partial<Record<BudgetLimit, number>> = {};
  for (const limit of LIMITS) {
    const max = budget[limit];
    if (typeof max === "number") limits[limit] = max;
  }
  return limits;
}

/**
 * One budget for a run and the sub-agents one model response starts together: they run at the same
 * time, so each is given a share of what the run had left, decided once and journaled before the
 * first of them runs (`<loop>#turn:<i>:budget`). A resume serves the decision, so a child resumed
 * after a crash gets the share it had, and no share is handed out twice.
 */
import { budgetSharesId, parseFrameId, toolStepId } from "../../events/ids.ts";
import { type Budget, shareBudget } from "../../policies/budget.ts";
import { responseAt } from "../../projections/runState.ts";
import { isSubAgentTool } from "../subruns/subAgentTools.ts";
import { type BudgetShares, usageOfRecord } from "./budget.ts";
import type { RunSession } from "./session.ts";

const SHARES_SOURCE = "budget-shares";

/**
 * The budget the sub-agent run of call `stepId` starts with: its share of what the run had left
 * when the model asked for it and for its siblings (the response's other sub-agent calls), or
 * undefined when the run has no budget. A call the split does not know (a sub-agent tool wrapped
 * in a tool of the caller's) gets what is left now.
 */
export async function budgetShare(session: RunSession, stepId: string): Promise<Budget | undefined> {
  const budget = session.budget.budget;
  if (budget === undefined) return undefined;
  const call = parseFrameId(stepId);
  if (call?.kind !== "tool" || call.loopId !== session.loopId) return session.budget.remaining();
  const shares = await sharesOf(session, call.turn);
  const index = shares.stepIds.indexOf(stepId);
  if (index < 0) return session.budget.remaining();
  return shareBudget(budget, shares.used, shares.stepIds.length, index);
}

/** The shares of turn `turn`'s sub-agents: served when journaled, else decided and journaled now. */
function sharesOf(session: RunSession, turn: number): Promise<BudgetShares> {
  const decisionId = budgetSharesId(session.loopId, turn);
  const recorded = session.state.decisions[decisionId];
  if (recorded?.source === SHARES_SOURCE) return Promise.resolve(recordedShares(recorded.choice));
  return session.budget.sharesOf(turn, async () => {
    const calls = responseAt(session.state, turn)?.toolCalls ?? [];
    const stepIds = calls.flatMap((c, index) => {
      const tool = Object.hasOwn(session.tools, c.name) ? session.tools[c.name] : undefined;
      return tool !== undefined && isSubAgentTool(tool) ? [toolStepId(session.loopId, turn, index)] : [];
    });
    session.budget.subAgentsRan(); // the sub-agents of earlier turns have all ended: read them once more
    const shares: BudgetShares = { used: await session.budget.used(), stepIds };
    // Durable before any of them starts its child: a crash after it resumes them with the same shares.
    await session.appender.append({
      type: "decision.recorded",
      data: { decisionId, source: SHARES_SOURCE, choice: shares },
    });
    return shares;
  });
}

function recordedShares(choice: unknown): BudgetShares {
  const c = (choice ?? {}) as { used?: unknown; stepIds?: unknown };
  const stepIds = Array.isArray(c.stepIds) ? c.stepIds.filter((s): s is string => typeof s === "string") : [];
  return { used: usageOfRecord(c.used), stepIds };
}

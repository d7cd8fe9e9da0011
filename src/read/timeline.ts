import type { RunActivity, RunWait } from "../index.ts";
import { describeCause, type ErrorCause } from "../journal.ts";
import type { BudgetBreach } from "../policies/budget.ts";
import { describeWait } from "../projections/waits.ts";
import { budgetText } from "./runInfo.ts";
import { type CallView, type RunView, type TurnView, turnsOf } from "./runView.ts";

/**
 * The words of a run's timeline: how each model call and tool call of a {@link RunView} stands,
 * and how the run ended. `loom show <runId>` (its story) and the viewer's pages (the run page,
 * time travel) both say what these functions say, so a run reads the same in the terminal and in
 * the browser. Statuses are hyphenated codes (`waiting-for-approval`, as `RunActivity`'s are);
 * {@link stepLabel} puts them in words. Given the run's activity (`runActivity`), a run whose
 * journal goes on but that nobody runs (`stalled`: its process died) shows nothing `calling` or
 * `running`: its steps in flight read `started`, their outcome never recorded.
 */

/** Whether a process runs the run now: its journal goes on and, when its activity is known, a live owner holds it. */
const runsNow = (view: RunView, activity: RunActivity | undefined): boolean =>
  view.status === "running" && (activity === undefined || activity === "running");

/**
 * A model call: `calling`, `backing-off` (a failed attempt, the next one due), `completed`,
 * `failed`, or `started` when the run has stopped with no answer recorded (cut off, or stalled).
 */
export type ModelStepStatus = "calling" | "backing-off" | "started" | "completed" | "failed";

/**
 * A tool call: `asked` (in the model's response, not started: the run goes on or can be resumed),
 * `not-run` (the run ended for good before it started), `running`, `started` (the run stopped with no outcome recorded),
 * `waiting-for-approval`, `waiting` (for a time or an event: docs/waits.md), `ok` or `error` (its
 * outcome, settled without running or not).
 */
export type CallStepStatus =
  | "asked"
  | "not-run"
  | "running"
  | "started"
  | "waiting-for-approval"
  | "waiting"
  | "ok"
  | "error";

/**
 * How model call `turn` stands in `view`; `activity`, the run's (`runActivity`), tells a run a
 * process runs from one nobody does (without it, the journal's status stands for it).
 *
 * @example
 * modelStatus(turnAt(view, 0)!, view, "stalled"); // "started": nothing calls the model
 */
export function modelStatus(turn: TurnView, view: RunView, activity?: RunActivity): ModelStepStatus {
  const m = turn.model;
  if (m.status !== "started") return m.status;
  if (!runsNow(view, activity)) return "started";
  return m.retryAt !== undefined && m.retryAt !== null ? "backing-off" : "calling";
}

/**
 * How tool call `call` stands in `view`; `activity` as for {@link modelStatus}.
 *
 * @example
 * callStatus(callAt(view, "support#turn:1:tool:0")!, view); // "waiting-for-approval"
 */
export function callStatus(call: CallView, view: RunView, activity?: RunActivity): CallStepStatus {
  switch (call.status) {
    case "awaiting-approval":
      return "waiting-for-approval";
    case "asked":
      // A run that ended for good never runs it; an interrupted one does when resumed.
      return view.status === "completed" || view.status === "failed" || view.status === "cancelled"
        ? "not-run"
        : "asked";
    case "running":
      if (runsNow(view, activity)) return "running";
      // A call that began a durable wait holds the run interrupted until the wait ends.
      return call.wait !== undefined && view.status === "interrupted" ? "waiting" : "started";
    default:
      return call.status;
  }
}

/**
 * The sleeps and event waits of the run in `view` (docs/waits.md): each call whose wait is
 * journaled and which has not ended, while the run is interrupted. Pending approvals, the other
 * kind of wait, are the run's `pending` (and `listPendingApprovals`), listed with their answers.
 *
 * @example
 * waitsOf(view); // [{ kind: "sleep", stepId: "reminder#turn:0:tool:0", until: "2026-01-04T00:00:00.000Z", … }]
 */
export function waitsOf(view: RunView): RunWait[] {
  const out: RunWait[] = [];
  if (view.status !== "interrupted" || view.runId === undefined) return out;
  for (const turn of turnsOf(view))
    for (const call of turn.calls)
      if (call.wait !== undefined && callStatus(call, view) === "waiting")
        out.push(describeWait(view.runId, call.stepId, call.toolName, call.wait));
  return out;
}

/**
 * A status in words: `waiting-for-approval` → `waiting for approval`.
 *
 * @example
 * stepLabel("backing-off"); // "backing off"
 */
export const stepLabel = (status: string): string => status.replaceAll("-", " ");

/** How a run ended, as its journal's last word says. */
export type RunEnd =
  | { readonly type: "completed"; readonly content: string; readonly iterations: number }
  | { readonly type: "interrupted"; readonly reason: string; readonly detail: unknown; readonly cause?: ErrorCause }
  | { readonly type: "cancelled"; readonly reason: string }
  | { readonly type: "failed"; readonly error: { readonly name: string; readonly message: string } };

/**
 * How the run in `view` ended, or undefined while it goes on (an interrupted run has ended until
 * it is resumed).
 *
 * @example
 * runEnd(view); // { type: "cancelled", reason: "operator stop" }
 */
export function runEnd(view: RunView): RunEnd | undefined {
  switch (view.status) {
    case "completed": {
      let iterations = 0;
      for (const turn of turnsOf(view)) if (turn.model.status === "completed") iterations++;
      return { type: "completed", content: view.answer ?? "", iterations };
    }
    case "interrupted": {
      const i = view.interruption;
      if (!i) return undefined;
      return { type: "interrupted", reason: i.reason, detail: i.detail, ...(i.cause ? { cause: i.cause } : {}) };
    }
    case "cancelled":
      return { type: "cancelled", reason: view.cancelled?.reason ?? "" };
    case "failed":
      return { type: "failed", error: view.error ?? { name: "Error", message: "" } };
    default:
      return undefined;
  }
}

/**
 * The end in words, on one line: `completed after 3 model calls`, `interrupted: model-error:
 * AI_APICallError (status 401, not retryable): Unauthorized`, `interrupted: budget: inputTokens
 * 600 of 600 reached; used 3 model calls, …`, `cancelled: operator stop`,
 * `failed: Error: boom`. Not escaped: text output escapes it (`printable`), HTML output quotes it.
 * `unresumable` (`RunInfo.unresumable`) is said after an interruption instead of advising a resume.
 *
 * @example
 * endText({ type: "cancelled", reason: "operator stop" }); // "cancelled: operator stop"
 */
export function endText(end: RunEnd, unresumable?: string): string {
  switch (end.type) {
    case "completed":
      return `completed after ${end.iterations} model call${end.iterations === 1 ? "" : "s"}`;
    case "interrupted": {
      // A budget stop says which limit was reached, the usage and what to do.
      const then = unresumable === undefined ? "" : `; ${unresumable}`;
      if (end.reason === "budget" && end.detail !== null && typeof end.detail === "object")
        return `interrupted: budget: ${budgetText(end.detail as BudgetBreach, unresumable === undefined)}${then}`;
      return `interrupted: ${end.reason}${end.cause ? `: ${describeCause(end.cause)}` : ""}${then}`;
    }
    case "cancelled":
      return `cancelled: ${end.reason}`;
    case "failed":
      return `failed: ${end.error.name}: ${end.error.message}`;
  }
}

/**
 * A call that ran more than once, in words: its earlier runs were cut off (a crash, a kill, a
 * stop) before their outcome was recorded, and a resume ran the tool again. "" for a call that ran
 * at most once.
 *
 * @example
 * rerunText(1); // "ran again after being cut off (no outcome recorded)"
 */
export function rerunText(reruns: number | undefined): string {
  if (!reruns) return "";
  return reruns === 1
    ? "ran again after being cut off (no outcome recorded)"
    : `ran ${reruns + 1} times, cut off ${reruns} times (no outcome recorded)`;
}

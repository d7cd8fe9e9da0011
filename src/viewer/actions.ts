import { errorGuard } from "../core/errors.ts";
import { type Journal, LoomError } from "../index.ts";

/**
 * What the viewer's buttons do: the run-control API (`recordApproval`, `cancelRun`, `forkRun`),
 * handed to the viewer by whoever starts it. The viewer shows approve/deny, cancel and fork only
 * when it is given these, and asks for a confirmation page before calling any of them.
 */

export type { PendingApproval } from "../index.ts";

/**
 * The run-control functions the viewer calls, with the signatures of src/runtime/control/operations.ts.
 *
 * @example
 * ```ts
 * import { cancelRun, forkRun, recordApproval } from "loom-agent";
 * await startViewer({ journal, actions: { recordApproval, cancelRun, forkRun } });
 * ```
 */
export interface ViewerActions {
  /** Journals an approval or a refusal of the pending call `stepId`. */
  recordApproval(
    journal: Journal,
    runId: string,
    stepId: string,
    decision: { readonly approved: boolean; readonly reason?: string; readonly by?: string },
  ): Promise<unknown>;
  /** Journals a request that the run stop at its next step, for good. */
  cancelRun(journal: Journal, runId: string, options: { readonly reason: string }): Promise<unknown>;
  /** Makes a new run from the run's journal up to step `at`. */
  forkRun(
    journal: Journal,
    runId: string,
    options: { readonly at: string; readonly newRunId: string },
  ): Promise<unknown>;
}

/**
 * The form field that carries the viewer's form token: random per server start, embedded in
 * every form of its pages, and what a POST without an `Origin` header must carry to be taken.
 */
export const FORM_TOKEN_FIELD = "token";

/** The decider the viewer names in the decisions it journals. */
export const VIEWER_ACTOR = "loom view";

/** An action the viewer can be asked for (a form's `action` field). */
export type ActionRequest =
  | { readonly kind: "approve" | "deny"; readonly runId: string; readonly stepId: string; readonly reason?: string }
  | { readonly kind: "cancel"; readonly runId: string; readonly reason: string }
  | { readonly kind: "fork"; readonly runId: string; readonly at: string; readonly newRunId: string };

/** An action form that is missing a field or names a kind the viewer does not know: a 400 page. */
export class ActionFormError extends LoomError {
  constructor(message: string) {
    super("badActionForm", message);
  }
}

/** True when `e` is an {@link ActionFormError}. */
export const isActionFormError = errorGuard(ActionFormError, { codes: ["badActionForm"] });

/** Reads an action from a form's fields; throws {@link ActionFormError} naming what is missing. */
export function actionFrom(runId: string, form: URLSearchParams): ActionRequest {
  const kind = form.get("action");
  const need = (field: string) => {
    const value = form.get(field)?.trim();
    if (!value)
      throw new ActionFormError(`the ${kind} form of run ${runId} has no ${field}: fill it in and send it again`);
    return value;
  };
  const reason = form.get("reason")?.trim() || undefined;
  switch (kind) {
    case "approve":
    case "deny":
      return { kind, runId, stepId: need("stepId"), ...(reason ? { reason } : {}) };
    case "cancel":
      return { kind, runId, reason: reason ?? "cancelled from loom view" };
    case "fork":
      return { kind, runId, at: need("at"), newRunId: need("newRunId") };
    default:
      throw new ActionFormError(`unknown action "${kind}" for run ${runId}: one of approve, deny, cancel, fork`);
  }
}

/** Calls the run-control function the action names. */
export async function perform(actions: ViewerActions, journal: Journal, request: ActionRequest): Promise<void> {
  switch (request.kind) {
    case "approve":
    case "deny":
      await actions.recordApproval(journal, request.runId, request.stepId, {
        approved: request.kind === "approve",
        by: VIEWER_ACTOR,
        ...(request.reason ? { reason: request.reason } : {}),
      });
      return;
    case "cancel":
      await actions.cancelRun(journal, request.runId, { reason: request.reason });
      return;
    case "fork":
      await actions.forkRun(journal, request.runId, { at: request.at, newRunId: request.newRunId });
      return;
  }
}

/** What the confirmation page asks, in words. */
export function confirmationText(request: ActionRequest): string {
  switch (request.kind) {
    case "approve":
      return `Approve call ${request.stepId} of run ${request.runId}? The run goes on with it when it is next resumed.`;
    case "deny":
      return `Decline call ${request.stepId} of run ${request.runId}? The model is told the call was declined.`;
    case "cancel":
      return `Cancel run ${request.runId}? A loop running it stops at its next step, and the run is never resumed.`;
    case "fork":
      return `Fork run ${request.runId} at ${request.at} into a new run ${request.newRunId}?`;
  }
}

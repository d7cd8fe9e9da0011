/**
 * The durable step's decision, pure (no clock read, no I/O: both come in as arguments): given the folded
 * journal, one step about to be taken and the clock, what the step does — serve what the journal
 * recorded, refuse a journal this code would not have written, wait out a journaled back-off, give
 * up on an outcome nobody recorded, or run the effect as attempt n. The runtime
 * (src/runtime/steps/durableStep.ts) carries the plan out; nothing here reads a clock or does I/O.
 */
import type { FrameState, RunState } from "../projections/runState.ts";

/** One step about to be taken: a model call or a tool call, as its frame would record it. */
export interface StepSpec {
  /** The frame id (`<loop>#model:<turn>`, a tool's step id). */
  readonly frameId: string;
  /** `model`, or `tool:<name>`. */
  readonly effect: string;
  /** The digest of what the effect is called with (the prompt's, the tool input's). */
  readonly inputDigest: string;
  /**
   * A start the journal holds without an outcome (the process died or was stopped mid-effect):
   * `rerun` runs the effect again as a new attempt, `fail` settles the step as failed instead
   * (a tool's `onUnknownOutcome: "fail"`, for effects that must never run twice).
   */
  readonly onUnknownOutcome: "rerun" | "fail";
  /** When false, a recorded frame is served without comparing its input digest (a replay of a recording). */
  readonly checkInput?: boolean;
}

/** What the step does; see {@link planStep}. */
export type StepPlan =
  /** The journal holds another frame at this id: this code did not record the run. */
  | { readonly kind: "diverged"; readonly what: string }
  /** The outcome is recorded (completed, or failed): served, nothing runs. */
  | { readonly kind: "recorded"; readonly frame: FrameState }
  /** Started, outcome never recorded, and the step must not run twice. */
  | { readonly kind: "outcome-unknown" }
  /** The run's journaled deadline has passed: nothing more runs. */
  | { readonly kind: "past-deadline" }
  /** A failed attempt's journaled back-off has not ended: wait until `retryAt`, then come back. */
  | { readonly kind: "waiting"; readonly attempt: number; readonly retryAt: number }
  /** Run the effect as attempt `attempt`; `spent` attempts no longer count against the policy. */
  | { readonly kind: "run"; readonly attempt: number; readonly spent: number };

/**
 * Decides what a durable step does at `now`: Given the folded journal, When the step is taken,
 * Then serve, refuse, wait, give up or run (and the runtime appends what that takes).
 *
 * @example
 * const plan = planStep(state, { frameId, effect: "model", inputDigest, onUnknownOutcome: "rerun" }, Date.now(), undefined);
 * if (plan.kind === "recorded") return plan.frame.output; // served from the journal
 */
export function planStep(state: RunState, step: StepSpec, now: number, deadlineAt: number | undefined): StepPlan {
  const frame = state.frames[step.frameId];
  if (frame !== undefined) {
    if (frame.effect !== step.effect) {
      return { kind: "diverged", what: `a frame of effect ${frame.effect} where this code takes ${step.effect}` };
    }
    if (step.checkInput !== false && frame.inputDigest !== step.inputDigest) {
      return { kind: "diverged", what: `a ${step.effect} frame with another input digest` };
    }
    if (frame.status !== "started") return { kind: "recorded", frame };
  }
  const failed = state.attempts[step.frameId];
  // Started after a failed attempt's record: that new attempt's outcome is what is unknown.
  const unknown = frame?.status === "started" && failed?.waiting !== true;
  if (unknown && step.onUnknownOutcome === "fail") return { kind: "outcome-unknown" };
  if (deadlineAt !== undefined && now >= deadlineAt) return { kind: "past-deadline" };
  if (failed?.waiting && failed.retryAt !== null && failed.retryAt > now) {
    return { kind: "waiting", attempt: failed.attempt, retryAt: failed.retryAt };
  }
  return { kind: "run", attempt: (failed?.attempt ?? 0) + 1, spent: failed?.spent ?? 0 };
}

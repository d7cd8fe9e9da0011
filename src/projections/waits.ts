/**
 * Reading a run's durable waits (docs/waits.md): what a journaled `<stepId>:wait` holds, the calls
 * whose wait is journaled and whose frame is still started, described for people
 * (`InterruptedAgentRun.waits`, `listWaits`, `loom show`, the viewer), and the `waiting`
 * interruption's detail. Pure reads of the fold: what a resumed wait does is `policies/wait.ts`.
 */
import { modelFrameId, parseFrameId, waitId } from "../events/ids.ts";
import { type RunState, responseAt } from "./runState.ts";
import type { RunWait } from "./types.ts";

/**
 * What a tool call waits for, as journaled in the decision `<stepId>:wait`: a time (`sleep`) or
 * an event delivered with a token (`event`), whose digest alone is journaled.
 */
export type WaitChoice =
  | {
      readonly kind: "sleep";
      /** When the call wakes (ISO 8601). */
      readonly until: string;
      /** The call's output once it wakes (default `{ woke: until }`). */
      readonly result?: unknown;
      /** What the wait is for, shown to operators. */
      readonly what?: string;
    }
  | {
      readonly kind: "event";
      /** sha256 hex of the token (the token itself is never journaled). */
      readonly tokenDigest: string;
      /** When the wait times out (ISO 8601): the call then fails with `wait-expired`. */
      readonly expiresAt?: string;
      readonly what?: string;
      /**
       * The loop's claim-check threshold (`claimCheck.thresholdBytes`), recorded when its blobs are
       * the journal's: a delivered payload whose canonical JSON is longer goes to the journal's
       * blob store, as the tool's own output would. Absent: the payload is journaled inline.
       */
      readonly claimCheckBytes?: number;
    };

/**
 * When a wait next needs its run resumed (ms since the epoch): a sleep's wake time, an event
 * wait's expiry, or undefined for an event wait that never expires (only a delivery ends it).
 *
 * @example
 * waitDueAt({ kind: "sleep", until: "2026-01-04T00:00:00.000Z" }); // 1767484800000
 */
export function waitDueAt(wait: WaitChoice): number | undefined {
  if (wait.kind === "sleep") return Date.parse(wait.until);
  return wait.expiresAt === undefined ? undefined : Date.parse(wait.expiresAt);
}

/**
 * Reads a `<stepId>:wait` decision's choice, or undefined when it is not one (a corrupted or
 * foreign entry is never taken for a wait).
 *
 * @example
 * asWaitChoice({ kind: "sleep", until: "2026-01-04T00:00:00.000Z" }); // the choice
 * asWaitChoice({ kind: "nap" }); // undefined
 */
export function asWaitChoice(choice: unknown): WaitChoice | undefined {
  if (choice === null || typeof choice !== "object") return undefined;
  const c = choice as Record<string, unknown>;
  if (c.kind === "sleep" && typeof c.until === "string" && !Number.isNaN(Date.parse(c.until))) return c as WaitChoice;
  if (c.kind === "event" && typeof c.tokenDigest === "string") {
    if (c.expiresAt !== undefined && (typeof c.expiresAt !== "string" || Number.isNaN(Date.parse(c.expiresAt))))
      return undefined;
    const limit = c.claimCheckBytes;
    if (limit !== undefined && !(typeof limit === "number" && Number.isInteger(limit) && limit > 0)) return undefined;
    return c as WaitChoice;
  }
  return undefined;
}

const WAIT_SUFFIX = waitId("");

/** The tool calls of a folded run that wait for a time or an event (wait journaled, frame still started). */
export function openWaits(state: RunState): { readonly stepId: string; readonly wait: WaitChoice }[] {
  const out: { stepId: string; wait: WaitChoice }[] = [];
  for (const decisionId in state.decisions) {
    if (!decisionId.endsWith(WAIT_SUFFIX)) continue;
    const stepId = decisionId.slice(0, -WAIT_SUFFIX.length);
    if (state.frames[stepId]?.status !== "started") continue; // ended: woken, delivered, expired
    const wait = asWaitChoice(state.decisions[decisionId]?.choice);
    if (wait !== undefined) out.push({ stepId, wait });
  }
  return out;
}

/** The tool a step id's call named, from its frame or the model's response. */
function toolNameOf(state: RunState, stepId: string): string {
  const effect = state.frames[stepId]?.effect;
  if (effect?.startsWith("tool:")) return effect.slice("tool:".length);
  const parsed = parseFrameId(stepId);
  const call = parsed?.kind === "tool" ? responseAt(state, parsed.turn)?.toolCalls[parsed.index] : undefined;
  return call?.name ?? "";
}

/** A sleep or an event wait, for people. */
export function describeWait(runId: string, stepId: string, toolName: string, wait: WaitChoice): RunWait {
  const what = wait.what === undefined ? {} : { what: wait.what };
  if (wait.kind === "sleep") {
    return {
      runId,
      stepId,
      kind: "sleep",
      toolName,
      ...what,
      until: wait.until,
      deliver: `wakes at ${wait.until}: loom wake (SQLite), a worker (PostgreSQL), or loop.run({ runId: "${runId}" }) once due`,
    };
  }
  return {
    runId,
    stepId,
    kind: "event",
    toolName,
    ...what,
    ...(wait.expiresAt === undefined ? {} : { expiresAt: wait.expiresAt }),
    deliver: `deliver the event with the token the tool handed out: loom deliver <token> --payload <json>, deliverEvent(journal, token, payload) or an eventWebhook${wait.expiresAt === undefined ? "" : `; times out at ${wait.expiresAt}`}`,
  };
}

/** An approval as a wait, for people. */
export function describeApproval(runId: string, stepId: string, toolName: string, expiresAt?: string): RunWait {
  return {
    runId,
    stepId,
    kind: "approval",
    toolName,
    ...(expiresAt === undefined ? {} : { expiresAt }),
    deliver: `a person answers: loom approve ${stepId} --run ${runId} (or deny), recordApproval(journal, runId, stepId, …) or loop.run({ approvals })${expiresAt === undefined ? "" : `; declined at ${expiresAt}`}`,
  };
}

/** The sleeps and event waits of a folded run, described. */
export function waitsIn(state: RunState, runId: string): RunWait[] {
  return openWaits(state).map(({ stepId, wait }) => describeWait(runId, stepId, toolNameOf(state, stepId), wait));
}

/**
 * The `waiting` interruption's detail: `{ stepIds, expiresAt }`, where `expiresAt` maps each
 * call with a time to when the run must next be resumed (a sleep's wake, an event wait's
 * timeout). A PostgreSQL worker parks the run until the first of them, as for approvals.
 */
export function waitingDetail(state: RunState, stepIds: readonly string[]): unknown {
  const expiresAt: Record<string, string> = {};
  for (const stepId of stepIds) {
    const wait = asWaitChoice(state.decisions[waitId(stepId)]?.choice);
    const due = wait === undefined ? undefined : waitDueAt(wait);
    if (due !== undefined) expiresAt[stepId] = new Date(due).toISOString();
  }
  return Object.keys(expiresAt).length === 0 ? { stepIds } : { stepIds, expiresAt };
}

/**
 * The calls of a run's last model turn that waited (their `<stepId>:wait` journaled), ended or
 * not, while the run is still in that turn (the next model call not started). These are the waits
 * of a run that stopped for them, and also of one whose process died after journaling a wait and
 * before the run could stop (`run.interrupted`): the decision, not the interruption, is the wait.
 */
export function lastTurnWaits(state: RunState): string[] {
  const turn = state.turns - 1;
  if (turn < 0 || state.loopId === undefined || state.frames[modelFrameId(state.loopId, state.turns)] !== undefined)
    return [];
  const out: string[] = [];
  for (const decisionId in state.decisions) {
    if (!decisionId.endsWith(WAIT_SUFFIX)) continue;
    const stepId = decisionId.slice(0, -WAIT_SUFFIX.length);
    const parsed = parseFrameId(stepId);
    if (parsed?.kind !== "tool" || parsed.turn !== turn) continue;
    if (asWaitChoice(state.decisions[decisionId]?.choice) !== undefined) out.push(stepId);
  }
  return out;
}

/**
 * When a run that waits is next due (ms since the epoch): the first wake or timeout of its open
 * waits, or undefined when only deliveries can end them. A run one of whose waits ended while it
 * was stopped (an event delivered, a sleep woken by a resume that did not get further) is due at
 * once (0). The waits are those its `waiting` interruption lists or, for a run whose process died
 * before it could stop, those of its last turn.
 */
export function runDueAt(state: RunState): number | undefined {
  const open = openWaits(state);
  if (endedWaits(state).length > 0) return 0; // a listed wait ended while the run was stopped: resume it now
  let first: number | undefined;
  for (const { wait } of open) {
    const due = waitDueAt(wait);
    if (due !== undefined && (first === undefined || due < first)) first = due;
  }
  return first;
}

/**
 * The waits of a run that waits (those its `waiting` interruption lists or, for a run whose
 * process died before it could stop, those of its last turn) that ended while it was stopped: an
 * event delivered, or a wait ended by a resume that stopped before going on. What makes the run
 * due at once ({@link runDueAt}).
 */
export function endedWaits(state: RunState): WaitChoice[] {
  const listed =
    state.status === "interrupted"
      ? (state.interruption?.detail as { stepIds?: unknown } | null)?.stepIds
      : lastTurnWaits(state);
  if (!Array.isArray(listed)) return [];
  const out: WaitChoice[] = [];
  for (const id of listed) {
    if (typeof id !== "string" || state.frames[id]?.status === "started") continue;
    const wait = asWaitChoice(state.decisions[waitId(id)]?.choice);
    if (wait !== undefined) out.push(wait);
  }
  return out;
}

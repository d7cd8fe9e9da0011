import { digestOfRecorded, sha256Hex } from "../../core/digest.ts";
import { errorGuard, LoomError } from "../../core/errors.ts";
import { toolStepId } from "../../events/ids.ts";
import type { Journal } from "../../events/spi.ts";
import type { EventStore } from "../../events/store.ts";
import type { ContinuesData, Message, ToolCall } from "../../events/types.ts";
import { type RunState, responseAt } from "../../projections/runState.ts";
import { assistantMessage, fedFromState, resolveClaimCheck, toolResultMessage } from "./conversation.ts";
import { foldRun, hydrateArchived } from "./readers.ts";

/**
 * A session's history in linear space: each message's run journals only what it adds (its new
 * message, then its own turns) and names the conversation before it (`run.started`'s
 * `continues`: the previous message's run, the seq and the digest its history ends at). A reader
 * walks the names back once and rebuilds the history, checking each link's digest; the histories
 * it rebuilt are kept in memory per store, so the next message reads only its own run.
 */

/** A history rebuilt from the journal: its messages, and their chained digest. */
export interface RunHistory {
  readonly messages: readonly Message[];
  /** `historyDigest` chained over each message's part ("" for an empty history). */
  readonly digest: string;
}

/**
 * A session message's run names a conversation that cannot be read back as it was: the run it
 * names is not in the journal (`historyMissing`: removed, or the journal was copied without it),
 * or rebuilds to other messages than its digest names (`historyChanged`: the named run's journal
 * was altered). The run (`runId`) can then be neither read nor resumed with its history.
 *
 * @example
 * await sessionHistory(journal, "chat-7").catch((e) => {
 *   if (isSessionHistoryError(e)) console.error(e.runId, "names", e.continues.runId);
 *   throw e;
 * });
 */
export class SessionHistoryError extends LoomError {
  declare readonly code: "historyMissing" | "historyChanged";
  /** The run whose history could not be read. */
  readonly runId: string;
  /** What it names: the run and the seq and digest its history ends at. */
  readonly continues: ContinuesData;
  constructor(code: "historyMissing" | "historyChanged", runId: string, continues: ContinuesData) {
    const named = `run ${runId} goes on from the conversation of run ${continues.runId} (its ${continues.messages} messages up to seq ${continues.seq})`;
    super(
      code,
      code === "historyMissing"
        ? `${named}, which is not in this journal: it was removed, or the journal was copied without it. Restore run ${continues.runId} (and the session's runs before it) from a backup to read or resume ${runId}.`
        : `${named}, but that run's journal no longer rebuilds to the history ${runId} started on (digest ${continues.digest.slice(0, 16)}…): the journal was altered; restore it from a backup.`,
    );
    this.runId = runId;
    this.continues = continues;
  }
}

/** Whether `e` is a {@link SessionHistoryError}. */
export const isSessionHistoryError = errorGuard(SessionHistoryError, { codes: ["historyMissing", "historyChanged"] });

/**
 * The digest of a history: the one before it chained with the messages one run adds, so hashing
 * a session stays linear in its length.
 */
export const historyDigest = (previous: string, added: readonly Message[]): string =>
  sha256Hex(`${previous}history:${digestOfRecorded(added).digest ?? ""}`);

/**
 * The conversation one run's journal records: its input as journaled (a prompt as a user message;
 * with `continues`, only what it adds), then each model call's answer and the results fed back
 * after it. `state` must have its archived outputs read back (`hydrateArchived`).
 */
export async function recordedConversation(journal: Journal, state: RunState): Promise<Message[]> {
  const input = state.input;
  const messages: Message[] =
    typeof input === "string" ? [{ role: "user", content: input }] : [...((input ?? []) as readonly Message[])];
  const loopId = state.loopId ?? "";
  for (let turn = 0; turn < state.turns; turn++) {
    const response = responseAt(state, turn);
    if (response === undefined) break;
    messages.push(assistantMessage(response));
    for (let index = 0; index < response.toolCalls.length; index++) {
      const stepId = toolStepId(loopId, turn, index);
      const fed = await fedFromState(state, stepId, (id, envelope) =>
        resolveClaimCheck(envelope, journal.blobs, `run ${state.runId} step ${id}`),
      );
      if (fed === undefined) break; // the turn's results are not all in (a run that stopped mid-turn)
      messages.push(toolResultMessage(response.toolCalls[index] as ToolCall, fed));
    }
  }
  return messages;
}

/**
 * What an ended run leaves to the next message: its history (resolved through `continues`),
 * then what it recorded: all of it for a completed run; for one cancelled or failed mid-turn, up
 * to its last model answer whose tool results were all recorded (a model is never sent a call
 * without its result). `state` is the run's fold, archived outputs not yet read back.
 */
export async function endedRunHistory(journal: Journal, state: RunState): Promise<RunHistory> {
  const before = await continuedHistory(journal, state);
  const own = await endedPart(journal, state);
  const history = { messages: [...before.messages, ...own], digest: historyDigest(before.digest, own) };
  remember(journal.store, state.runId ?? "", history);
  return history;
}

/**
 * A run's whole input: the history its `continues` names, then its input as journaled (the
 * input as journaled alone for a run that names none). What a resume starts the conversation with.
 */
export async function resolvedInput(journal: Journal, state: RunState): Promise<string | readonly Message[]> {
  const input = state.input ?? "";
  if (state.continues === undefined) return input;
  const before = await continuedHistory(journal, state);
  return [...before.messages, ...(typeof input === "string" ? [{ role: "user" as const, content: input }] : input)];
}

/** The history `state`'s `continues` names (empty when it names none), read back and checked. */
export async function continuedHistory(journal: Journal, state: RunState): Promise<RunHistory> {
  const continues = state.continues;
  if (continues === undefined) return EMPTY;
  return resolveContinues(journal, state.runId ?? "", continues);
}

const EMPTY: RunHistory = { messages: [], digest: "" };

/** One run of the walk back: what it names and what it adds. */
interface Link {
  readonly referrer: string;
  readonly continues: ContinuesData;
  readonly own: readonly Message[];
}

/**
 * The history `continues` (journaled by run `referrer`) names: walks the names back to a history
 * already rebuilt in this process or to the session's first run, then forward, checking each
 * link's digest and count.
 */
async function resolveContinues(journal: Journal, referrer: string, continues: ContinuesData): Promise<RunHistory> {
  const links: Link[] = [];
  let base = EMPTY;
  let at: { referrer: string; continues: ContinuesData } | undefined = { referrer, continues };
  while (at !== undefined) {
    const known = recalled(journal.store, at.continues);
    if (known !== undefined) {
      base = known;
      break;
    }
    const state = await foldRun(journal, at.continues.runId);
    if (state.status === "new") throw new SessionHistoryError("historyMissing", at.referrer, at.continues);
    links.push({ ...at, own: await endedPart(journal, state) });
    at = state.continues === undefined ? undefined : { referrer: at.continues.runId, continues: state.continues };
  }
  const messages = [...base.messages];
  let digest = base.digest;
  for (let i = links.length - 1; i >= 0; i--) {
    const link = links[i] as Link;
    messages.push(...link.own);
    digest = historyDigest(digest, link.own);
    if (digest !== link.continues.digest || messages.length !== link.continues.messages) {
      throw new SessionHistoryError("historyChanged", link.referrer, link.continues);
    }
  }
  const history = { messages, digest };
  if (links.length > 0) remember(journal.store, continues.runId, history);
  return history;
}

/** What a run that ended adds to its session's history (see {@link endedRunHistory}). */
async function endedPart(journal: Journal, state: RunState): Promise<Message[]> {
  const messages = await recordedConversation(journal, await hydrateArchived(journal, state));
  return state.status === "completed" ? messages : wholeTurns(messages);
}

/** `messages` without a last assistant message whose tool calls are not all followed by their results. */
function wholeTurns(messages: Message[]): Message[] {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message;
    if (m.role !== "assistant") continue;
    return messages.length - 1 - i < m.toolCalls.length ? messages.slice(0, i) : messages;
  }
  return messages;
}

// Histories rebuilt in this process, per store and run: a history is named by its digest, so one
// found here is the one a reference names, and a session's next message reads only its own run.
// Bounded: the least recently used go first.
const KEPT_HISTORIES = 256;
const histories = new WeakMap<EventStore, Map<string, RunHistory>>();

/** The history through run `runId` this process rebuilt last (see {@link endedRunHistory}), if it kept it. */
export const rememberedHistory = (store: EventStore, runId: string): RunHistory | undefined =>
  histories.get(store)?.get(runId);

function recalled(store: EventStore, continues: ContinuesData): RunHistory | undefined {
  const kept = histories.get(store);
  const history = kept?.get(continues.runId);
  if (kept === undefined || history === undefined || history.digest !== continues.digest) return undefined;
  kept.delete(continues.runId); // most recently used last
  kept.set(continues.runId, history);
  return history;
}

function remember(store: EventStore, runId: string, history: RunHistory): void {
  let kept = histories.get(store);
  if (kept === undefined) histories.set(store, (kept = new Map()));
  kept.delete(runId);
  kept.set(runId, { messages: Object.freeze([...history.messages]), digest: history.digest });
  if (kept.size > KEPT_HISTORIES) kept.delete(kept.keys().next().value as string);
}

// The inputs `nextSessionTurn` made, with the history they start with: a run started on one of
// them journals only what it adds, and names the rest.
const turnInputs = new WeakMap<readonly Message[], ContinuesData>();

/** The input of a session's next message: `history`'s messages (those of run `runId` at `seq`), then `added`. */
export function continuingInput(runId: string, seq: number, history: RunHistory, added: Message): readonly Message[] {
  const input = [...history.messages, added];
  turnInputs.set(input, { runId, seq, digest: history.digest, messages: history.messages.length });
  return input;
}

/** The history a run's `input` starts with, when `continuingInput` made it (this very array). */
export const continuesOf = (input: unknown): ContinuesData | undefined =>
  Array.isArray(input) ? turnInputs.get(input) : undefined;

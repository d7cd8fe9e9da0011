import { sha256Hex } from "../core/digest.ts";
import { SnapshotError } from "../core/errors.ts";
import { parseFrameId } from "../events/ids.ts";
import type { StoredSnapshot } from "../events/store.ts";
import type { JournalEntry } from "../events/types.ts";
import { type FrameState, type RunState, runStateProjection } from "./runState.ts";
import { tokenUsage } from "./usage.ts";

/**
 * A run snapshot: the folded `RunState` at one seq, as JSON text with the sha256 of that text, so
 * a resume folds only the entries after it. Pure: making one and checking one read nothing; the
 * runtime (src/runtime/base/snapshots.ts) reads and writes them through the store.
 *
 * The body also names the entry at its seq (`anchor`: its type and time), so a snapshot of a
 * stream that is not the one in the store any more (the run removed and started again under the
 * same id) is told apart from the run's own, and never used.
 */

/** The body's layout version: a body of another version is ignored (folded from the journal instead). */
const FORMAT = 1;
/**
 * The compact layout (`compactRunState`): the state a resume needs, without the frames of the turns
 * before the last two. Only a reader that asks for a compact state uses it (a resume); a full read
 * folds the journal instead.
 */
const COMPACT_FORMAT = 2;

/** The entry a snapshot was taken after: what the reader checks the stream against. */
export interface SnapshotAnchor {
  readonly type: string;
  readonly at: string;
}

/**
 * What a snapshot says of the entries it folded besides their fold: what a run's listing (`loom
 * runs`) shows of them, so that it reads only the entries after the snapshot. Optional in the
 * body (snapshots written before it have none: their readers read every entry for these).
 */
export interface SnapshotFacts {
  /** The entries the store held up to the snapshot's seq when it was written. */
  readonly entries: number;
  /** Their bytes as stored (type, data and meta as JSON text: the UTF-8 length of each, summed). */
  readonly bytes: number;
  /** The run's first entry, as read (`run.started`: when the run started, and whether it is a fork). */
  readonly first: JournalEntry;
  /**
   * For a compact state (`compactRunState`): what the frames it left out (those of turns below
   * `compacted.belowTurn`) counted: completed model calls and the tokens their frames recorded.
   */
  readonly leftOut?: LeftOutFacts;
}

/** What the frames a compact state left out counted (see {@link SnapshotFacts.leftOut}). */
export interface LeftOutFacts {
  readonly modelCalls: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

interface Body {
  readonly format: number;
  readonly runId: string;
  readonly seq: number;
  readonly anchor: SnapshotAnchor;
  readonly state: RunState;
  readonly facts?: SnapshotFacts;
}

/** What checking a stored snapshot gives: its state and anchor, or why it is not to be trusted. */
export type SnapshotCheck =
  | {
      readonly ok: true;
      readonly state: RunState;
      readonly anchor: SnapshotAnchor;
      /** What it says of the entries it folded, when it was written with them and they are well formed. */
      readonly facts?: SnapshotFacts;
    }
  | { readonly ok: false; readonly error: SnapshotError };

/**
 * The bytes an entry takes in the journal: its type, data and meta as stored (UTF-8 JSON text).
 *
 * @example
 * entryBytes(entries[0]); // 412
 */
export const entryBytes = (entry: Pick<JournalEntry, "type" | "data" | "meta">): number =>
  Buffer.byteLength(entry.type) +
  Buffer.byteLength(JSON.stringify(entry.data)) +
  Buffer.byteLength(JSON.stringify(entry.meta));

/**
 * The facts of `entries` read from the run's first one (no snapshot before them).
 *
 * @example
 * const facts = entryFacts(await readJournal(journal, "run-1")); // facts.entries, facts.bytes
 */
export function entryFacts(entries: readonly JournalEntry[]): SnapshotFacts | undefined {
  const first = entries[0];
  if (first === undefined) return undefined;
  let bytes = 0;
  for (const e of entries) bytes += entryBytes(e);
  return { entries: entries.length, bytes, first };
}

/**
 * `facts` (of the entries up to a snapshot) extended with `tail`, the entries after it; for a
 * state compacted again, `dropped` are the frames that compaction left out this time.
 *
 * @example
 * const next = extendFacts(check.facts, tail); // next.entries === check.facts.entries + tail.length
 */
export function extendFacts(
  facts: SnapshotFacts,
  tail: readonly JournalEntry[],
  dropped?: Iterable<FrameState>,
): SnapshotFacts {
  let bytes = facts.bytes;
  for (const e of tail) bytes += entryBytes(e);
  const left = dropped === undefined ? undefined : leftOutOf(dropped);
  const leftOut =
    left === undefined
      ? facts.leftOut
      : {
          modelCalls: (facts.leftOut?.modelCalls ?? 0) + left.modelCalls,
          inputTokens: (facts.leftOut?.inputTokens ?? 0) + left.inputTokens,
          outputTokens: (facts.leftOut?.outputTokens ?? 0) + left.outputTokens,
        };
  return {
    entries: facts.entries + tail.length,
    bytes,
    first: facts.first,
    ...(leftOut === undefined ? {} : { leftOut }),
  };
}

/** What `frames` count: completed model frames and the tokens they recorded (as `loom runs` counts them). */
function leftOutOf(frames: Iterable<FrameState>): LeftOutFacts {
  const table: Record<string, FrameState> = Object.create(null);
  let modelCalls = 0;
  for (const frame of frames) {
    table[frame.frameId] = frame;
    if (frame.status === "completed" && parseFrameId(frame.frameId)?.kind === "model") modelCalls++;
  }
  const usage = tokenUsage({ frames: table } as RunState);
  return { modelCalls, inputTokens: usage.inputTokens, outputTokens: usage.outputTokens };
}

/**
 * The snapshot of `state`, which folded the run's entries up to `last` (its last entry), with
 * what `facts` says of those entries (what a run's listing reads of them: see {@link SnapshotFacts}).
 *
 * @example
 * const snapshot = runSnapshotOf(foldEntries(entries), entries.at(-1)!);
 * await store.writeSnapshot?.(runId, snapshot);
 */
export function runSnapshotOf(state: RunState, last: JournalEntry, facts?: SnapshotFacts): StoredSnapshot {
  const body: Body = {
    format: state.compacted === undefined ? FORMAT : COMPACT_FORMAT,
    runId: last.runId,
    seq: last.seq,
    anchor: { type: last.type, at: last.meta.at },
    state,
    ...(facts === undefined ? {} : { facts }),
  };
  const text = JSON.stringify(body);
  return { seq: last.seq, digest: sha256Hex(text), body: text };
}

/**
 * Checks a stored snapshot of run `runId` (its digest, then its layout) and gives back its state,
 * fresh and the caller's to evolve. A snapshot that fails a check is never used: the result says
 * why (`SnapshotError`, code `snapshotDigestMismatch` or `snapshotUnreadable`).
 *
 * @example
 * const check = checkRunSnapshot("run-1", await store.latestSnapshot!("run-1"));
 * if (check.ok) check.state.version; // the seq to read the tail after
 */
export function checkRunSnapshot(runId: string, stored: StoredSnapshot): SnapshotCheck {
  const seq = stored.seq;
  const fail = (code: "snapshotDigestMismatch" | "snapshotUnreadable", why: string): SnapshotCheck => ({
    ok: false,
    error: new SnapshotError(code, runId, seq, `${why}; it was ignored and the whole journal folded instead`),
  });
  if (typeof stored.body !== "string" || sha256Hex(stored.body) !== stored.digest) {
    return fail("snapshotDigestMismatch", "its body does not match its digest (damaged in the store)");
  }
  let body: Body;
  try {
    body = JSON.parse(stored.body) as Body;
  } catch {
    return fail("snapshotUnreadable", "its body is not JSON");
  }
  if (body?.format !== FORMAT && body?.format !== COMPACT_FORMAT)
    return fail(
      "snapshotUnreadable",
      `its layout is version ${String(body?.format)}, not ${FORMAT} or ${COMPACT_FORMAT}`,
    );
  if (body.runId !== runId || body.seq !== seq) {
    return fail("snapshotUnreadable", `it was taken of run ${String(body.runId)} at seq ${String(body.seq)}`);
  }
  const state = stateOf(body.state, seq);
  if (state === undefined) return fail("snapshotUnreadable", "its state is not a run's folded state");
  const compacted = (body.state as { compacted?: { belowTurn?: unknown } }).compacted;
  if (body.format === COMPACT_FORMAT) {
    const below = compacted?.belowTurn;
    if (typeof below !== "number" || !Number.isInteger(below) || below < 0)
      return fail("snapshotUnreadable", "it is compact but names no turn its frames start at");
  } else if (compacted !== undefined) return fail("snapshotUnreadable", "it is compact but not in the compact layout");
  const anchor = body.anchor;
  if (typeof anchor?.type !== "string" || typeof anchor.at !== "string")
    return fail("snapshotUnreadable", "it names no anchor entry");
  const facts = factsOf(body.facts, seq, body.format === COMPACT_FORMAT);
  return { ok: true, state, anchor: { type: anchor.type, at: anchor.at }, ...(facts === undefined ? {} : { facts }) };
}

/** The body's facts when they are well formed (a compact state's with `leftOut`), else undefined: read every entry instead. */
function factsOf(raw: unknown, seq: number, compact: boolean): SnapshotFacts | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const f = raw as Record<string, unknown>;
  const count = (n: unknown) => typeof n === "number" && Number.isInteger(n) && n >= 0;
  if (!count(f.entries) || !count(f.bytes) || (f.entries as number) > seq) return undefined;
  const first = f.first as { type?: unknown; seq?: unknown; meta?: { at?: unknown } } | null;
  if (typeof first?.type !== "string" || !count(first.seq) || typeof first.meta?.at !== "string") return undefined;
  const left = f.leftOut as Record<string, unknown> | undefined;
  const tokens = (n: unknown) => typeof n === "number" && Number.isFinite(n);
  if (compact && (!count(left?.modelCalls) || !tokens(left?.inputTokens) || !tokens(left?.outputTokens)))
    return undefined;
  return f as unknown as SnapshotFacts;
}

const RECORDS = ["frames", "decisions", "settled", "attempts", "approvalRequests"] as const;

/**
 * The state a resume needs of `state`, sharing its records: the frames of the last two model turns
 * (the last one recorded, which the chart walks again, and the one before, whose prompt digest and
 * results seed the conversation's tail) and of every step that is not a turn's, without the frames
 * of older turns. Everything else (decisions, settled calls, attempts) is kept. A state compacted
 * already is compacted again from its own floor up. Pure; the result is marked `compacted`.
 *
 * @example
 * const compact = compactRunState(foldEntries(entries)); // compact.compacted.belowTurn === turns - 2
 */
export function compactRunState(state: RunState): RunState {
  const belowTurn = Math.max(0, state.turns - 2, state.compacted?.belowTurn ?? 0);
  const frames: Record<string, FrameState> = Object.create(null);
  for (const [id, frame] of Object.entries(state.frames)) {
    const turn = parseFrameId(id)?.turn;
    if (turn === undefined || turn >= belowTurn) frames[id] = frame;
  }
  return { ...state, frames, compacted: { belowTurn } };
}

/**
 * The parsed state as the fold would hold it: tables without a prototype (ids come from users),
 * the fields JSON leaves out when undefined put back, and `output` present on every completed
 * frame of the hot journal (the fold sets it, undefined or not; `hydrateArchived` tells by it).
 */
function stateOf(parsed: unknown, seq: number): RunState | undefined {
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const p = parsed as Record<string, unknown>;
  if (p.version !== seq || typeof p.status !== "string" || typeof p.turns !== "number") return undefined;
  const state = runStateProjection.initial();
  for (const key of Object.keys(state) as (keyof RunState)[]) {
    if (RECORDS.includes(key as (typeof RECORDS)[number])) continue;
    if (Object.hasOwn(p, key)) (state as unknown as Record<string, unknown>)[key] = p[key];
  }
  // The optional fields initial() leaves out: a redacted run stays unresumable, a compact state says so.
  for (const key of ["redacted", "compacted"] as const) {
    if (p[key] !== undefined) (state as unknown as Record<string, unknown>)[key] = p[key];
  }
  // When calls settled: a table without a prototype, empty in a snapshot written before it was kept.
  const settledAt = p.settledAt;
  state.settledAt = Object.assign(
    Object.create(null),
    typeof settledAt === "object" && settledAt !== null ? settledAt : {},
  );
  for (const key of RECORDS) {
    const table = p[key];
    if (typeof table !== "object" || table === null || Array.isArray(table)) return undefined;
    Object.assign(state[key], table);
  }
  for (const frame of Object.values(state.frames)) {
    if (frame.status === "completed" && frame.archived === undefined && !("output" in frame)) frame.output = undefined;
  }
  return state;
}

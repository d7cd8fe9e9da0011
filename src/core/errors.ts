/**
 * Every error Loom throws on purpose is a `LoomError`: a named class with a string `code`
 * (stable, for programs) and a message that says which run, step or decision is involved and
 * what to do about it (for people).
 */
export class LoomError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Why a value has no canonical JSON form. */
export type CanonicalJsonErrorCode =
  | "non-finite-number"
  | "bigint"
  | "cycle"
  | "lone-surrogate"
  | "too-deep"
  | "no-json-form"
  | "to-json-threw"
  | "read-threw";

/** A value that cannot be written as RFC 8785 canonical JSON. `path` locates the culprit. */
export class CanonicalJsonError extends LoomError {
  declare readonly code: CanonicalJsonErrorCode;
  readonly path: string;
  constructor(code: CanonicalJsonErrorCode, path: string, message: string, options?: { cause?: unknown }) {
    super(code, `canonicalJson: ${message} at ${path}`, options);
    this.path = path;
  }
}

/** A run's configuration is invalid, or contradicts what the run's journal recorded. */
export class AgentLoopConfigError extends LoomError {
  constructor(message: string, code = "agentLoopConfig") {
    super(code, message);
  }
}

/** The journal holds a frame that the code would not produce now (renamed tool, other input…). */
export class ReplayDivergenceError extends LoomError {
  readonly runId: string;
  readonly frameId: string;
  constructor(runId: string, frameId: string, message: string) {
    super("replayDivergence", message);
    this.runId = runId;
    this.frameId = frameId;
  }
}

/** An append's `expectedVersion` did not match the stream: another writer got there first. */
export class ConcurrencyError extends LoomError {
  readonly runId: string;
  readonly expected: number;
  readonly actual: number;
  constructor(runId: string, expected: number, actual: number) {
    super(
      "concurrency",
      `run ${runId}: append expected version ${expected} but the stream is at ${actual}; another writer appended first. Re-read the journal and retry, or let the other writer finish the run.`,
    );
    this.runId = runId;
    this.expected = expected;
    this.actual = actual;
  }
}

/** Who holds a run's ownership, as a store reports it (see `EventStore.acquire`). */
export interface RunHolderInfo {
  /** The name the owner gave (`ownership.owner`, or host:pid:random). */
  readonly owner: string;
  readonly host: string;
  readonly pid: number;
  /** The fencing token of its lease. */
  readonly token: number;
  /** When its lease runs out unless renewed (ms since the epoch, the store's clock). */
  readonly expiresAt: number;
}

const holderText = (h: RunHolderInfo) => `${h.owner} (pid ${h.pid} on host ${h.host}, token ${h.token})`;

/**
 * Another live process (or `loop.run` call) owns the run: one owner at a time.
 *
 * @example
 * try {
 *   await loop.run({ runId, journal });
 * } catch (e) {
 *   if (isRunBusyError(e)) console.log(`busy: ${e.holder.owner}, free in ${e.retryAfterMs} ms at most`);
 * }
 */
export class RunBusyError extends LoomError {
  readonly runId: string;
  readonly holder: RunHolderInfo;
  /** How long until the holder's lease runs out unless renewed, by the store's clock. */
  readonly retryAfterMs: number;
  constructor(runId: string, holder: RunHolderInfo, retryAfterMs: number) {
    super(
      "runBusy",
      `run ${runId} is being run by ${holderText(holder)}, whose lease runs another ${Math.max(0, Math.round(retryAfterMs))} ms unless renewed. Let that process finish the run, or wait for it: loop.run({ runId, journal, ownership: { waitMs } }). A crashed owner on this host is taken over at once; on another host when its lease runs out.`,
    );
    this.runId = runId;
    this.holder = holder;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * An append fenced with a lease's token was refused: the run changed owner (this process stalled
 * past its lease and another took the run over) or the lease was released. Nothing was appended.
 *
 * @example
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isOwnershipLostError(e)) return; // another process has the run now; it finishes it
 *   throw e;
 * });
 */
export class OwnershipLostError extends LoomError {
  readonly runId: string;
  /** The token this writer held. */
  readonly token: number;
  /** Who holds the run now, if anyone. */
  readonly holder: RunHolderInfo | undefined;
  constructor(runId: string, token: number, holder: RunHolderInfo | undefined, unconfirmed?: UnconfirmedLease) {
    super(
      "ownershipLost",
      unconfirmed === undefined
        ? `run ${runId}: this writer no longer owns the run (its token ${token}; ${holder ? `now held by ${holderText(holder)}` : "the lease was released"}), so nothing was appended and it runs no further effect. Another process took the run over, usually because this one stalled past its lease: let that one finish it, or raise ownership.leaseMs (workers: leaseMs).`
        : `run ${runId}: step ${unconfirmed.step} was not started: this writer's lease (token ${token}, ${unconfirmed.leaseMs} ms) was last confirmed ${Math.round(unconfirmed.staleForMs)} ms ago, so it may have run out, and renewing it failed (${unconfirmed.cause instanceof Error ? unconfirmed.cause.message : String(unconfirmed.cause)}). The writer gives the run up: another process takes it over once the lease runs out. If this process stalls often (long pauses, a blocked event loop), raise ownership.leaseMs (workers: leaseMs).`,
      unconfirmed === undefined ? undefined : { cause: unconfirmed.cause },
    );
    this.runId = runId;
    this.token = token;
    this.holder = holder;
  }
}

/**
 * Why a writer gave its run up before an effect (see `HeldLease.confirm`): its lease may have run
 * out by its own clock, and renewing it failed for a reason other than a takeover.
 */
export interface UnconfirmedLease {
  /** The step whose effect was not started. */
  readonly step: string;
  /** How long ago, by the writer's monotonic clock, its lease was last confirmed (Infinity: never). */
  readonly staleForMs: number;
  readonly leaseMs: number;
  /** What the renewal threw. */
  readonly cause: unknown;
}

/** Stored bytes do not match the digest that vouches for them (blob, archived frame). */
export class IntegrityError extends LoomError {
  constructor(message: string, code = "integrity") {
    super(code, message);
  }
}

/** An entry read from a store is not a valid journal entry. A damaged journal is never folded. */
export class JournalFormatError extends LoomError {
  readonly runId: string;
  readonly seq: number | undefined;
  readonly field: string | undefined;
  constructor(runId: string, seq: number | undefined, field: string | undefined, message: string) {
    super(
      "journalFormat",
      `run ${runId}${seq === undefined ? "" : ` seq ${seq}`}${field === undefined ? "" : ` (${field})`}: ${message}`,
    );
    this.runId = runId;
    this.seq = seq;
    this.field = field;
  }
}

/** The names and codes of Loom's errors, each guard adding its class's: what `isLoomError` knows one by. */
const loomNames = new Set<string>(["LoomError"]);
const loomCodes = new Set<string>();

/** An object shaped as a Loom error is: a string `message` and a string `code`. */
const coded = (e: unknown): e is { readonly name?: unknown; readonly code: string; readonly message: string } =>
  typeof e === "object" &&
  e !== null &&
  typeof (e as { code?: unknown }).code === "string" &&
  typeof (e as { message?: unknown }).message === "string";

/**
 * The guard of one of Loom's error classes. It is true for an instance, and also for the same
 * error made by another copy of Loom in the process (a plugin that bundles its own), which
 * `instanceof` does not recognise: an error with a string `code` whose name is the class's (or a
 * subclass's, `also.names`), or whose code is one only this class uses (`also.codes`, which still
 * holds where a bundler renamed the classes).
 *
 * @example
 * export const isRunBusyError = errorGuard(RunBusyError, { codes: ["runBusy"] });
 */
export function errorGuard<T extends LoomError>(
  cls: abstract new (...args: never[]) => T,
  also: { readonly names?: readonly string[]; readonly codes?: readonly string[] } = {},
): (e: unknown) => e is T {
  const names = new Set([cls.name, ...(also.names ?? [])]);
  const codes = new Set(also.codes ?? []);
  for (const name of names) loomNames.add(name);
  for (const code of codes) loomCodes.add(code);
  return (e: unknown): e is T => e instanceof cls || (coded(e) && (names.has(e.name as string) || codes.has(e.code)));
}

/** The keys of a record that names every member of a code union: a list the compiler keeps whole. */
export const codesOf = <C extends string>(codes: Record<C, true>): readonly C[] => Object.keys(codes) as C[];

/**
 * True when `e` is a {@link LoomError}: any error Loom throws on purpose, with its stable `code`.
 *
 * @example
 * ```ts
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isLoomError(e)) console.error(`${e.code}: ${e.message}`);
 *   throw e;
 * });
 * ```
 */
export const isLoomError = (e: unknown): e is LoomError =>
  e instanceof LoomError || (coded(e) && (loomNames.has(e.name as string) || loomCodes.has(e.code)));

/**
 * True when `e` is a {@link CanonicalJsonError}: a value with no canonical JSON form (`code` says
 * why, `path` where).
 *
 * @example
 * ```ts
 * try {
 *   canonicalJson({ n: 1n });
 * } catch (e) {
 *   if (isCanonicalJsonError(e)) console.error(e.code, e.path); // "bigint", the path to n
 * }
 * ```
 */
export const isCanonicalJsonError = errorGuard(CanonicalJsonError);

/**
 * True when `e` is an {@link AgentLoopConfigError}: a loop's configuration is invalid, or
 * contradicts what its run recorded (the mode pin).
 *
 * @example
 * ```ts
 * const lean = agentLoop$({ id: "support", model, tools, toolCallLog: "lean" });
 * await lean.run({ runId, journal }).catch((e) => {
 *   if (isAgentLoopConfigError(e)) console.error(e.message); // "… recorded full but is configured lean"
 *   throw e;
 * });
 * ```
 */
export const isAgentLoopConfigError = errorGuard(AgentLoopConfigError);

/**
 * True when `e` is a {@link ReplayDivergenceError}: the journal holds a frame the code would not
 * produce now (`runId`, `frameId`).
 *
 * @example
 * ```ts
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isReplayDivergenceError(e)) console.error(`run ${e.runId} diverged at ${e.frameId}`);
 *   throw e;
 * });
 * ```
 */
export const isReplayDivergenceError = errorGuard(ReplayDivergenceError, { codes: ["replayDivergence"] });

/**
 * True when `e` is a {@link ConcurrencyError}: an append's `expectedVersion` did not match the
 * stream (another writer got there first).
 *
 * @example
 * ```ts
 * await store.append(runId, entries, { expectedVersion: 3 }).catch((e) => {
 *   if (isConcurrencyError(e)) console.error(`expected ${e.expected}, the stream is at ${e.actual}`);
 *   throw e;
 * });
 * ```
 */
export const isConcurrencyError = errorGuard(ConcurrencyError, { codes: ["concurrency"] });

/**
 * True when `e` is a {@link RunBusyError}: another live process owns the run (`holder`,
 * `retryAfterMs`).
 *
 * @example
 * ```ts
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isRunBusyError(e)) console.log(`busy: ${e.holder.owner}, free in ${e.retryAfterMs} ms at most`);
 *   throw e;
 * });
 * ```
 */
export const isRunBusyError = errorGuard(RunBusyError, { codes: ["runBusy"] });

/**
 * True when `e` is an {@link OwnershipLostError}: a fenced append was refused because the run
 * changed owner; nothing was appended.
 *
 * @example
 * ```ts
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isOwnershipLostError(e)) return; // another process has the run now; it finishes it
 *   throw e;
 * });
 * ```
 */
export const isOwnershipLostError = errorGuard(OwnershipLostError, { codes: ["ownershipLost"] });

/**
 * True when `e` is an {@link IntegrityError}: stored bytes (a blob, an archived frame) do not match
 * the digest that vouches for them.
 *
 * @example
 * ```ts
 * await readArchived(journal, runId, stepId).catch((e) => {
 *   if (isIntegrityError(e)) console.error(`altered: ${e.message}`); // the archive or blob store was changed
 *   throw e;
 * });
 * ```
 */
export const isIntegrityError = errorGuard(IntegrityError);

/**
 * True when `e` is a {@link JournalFormatError}: an entry read from a store is not a valid journal
 * entry (`runId`, `seq`, `field`).
 *
 * @example
 * ```ts
 * await readJournal(journal, runId).catch((e) => {
 *   if (isJournalFormatError(e)) console.error(`run ${e.runId} seq ${e.seq}: ${e.message}`);
 *   throw e;
 * });
 * ```
 */
export const isJournalFormatError = errorGuard(JournalFormatError, { codes: ["journalFormat"] });

/**
 * A run is resumed under another definition of its loop (a tool added, removed or given another
 * input schema, another system prompt) than the one `run.started` recorded, and the loop does not
 * accept that change (`acceptDefinitionChanges`). Thrown before anything is appended.
 */
export class DefinitionChangedError extends LoomError {
  readonly runId: string;
  /** The changes, in words (`tool "search" added`). */
  readonly changes: readonly string[];
  constructor(runId: string, loopId: string, changes: readonly string[], accepts: string) {
    super(
      "definitionChanged",
      `run ${runId} was recorded under another definition of loop "${loopId}": ${changes.join("; ")}. Resume it with the definition that recorded it, start a new run, or declare the change accepted (${accepts}).`,
    );
    this.runId = runId;
    this.changes = changes;
  }
}

/**
 * True when `e` is a {@link DefinitionChangedError}: a run resumed under another definition of its
 * loop (`changes` lists them).
 *
 * @example
 * ```ts
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isDefinitionChangedError(e)) console.error(e.changes.join("; ")); // tool "search" added
 *   throw e;
 * });
 * ```
 */
export const isDefinitionChangedError = errorGuard(DefinitionChangedError, { codes: ["definitionChanged"] });

/**
 * The run was cancelled (`cancelRun`): it ends with `run.cancelled` and is never resumed. A loop
 * running it when the cancel came stops at its next step (a tool in flight sees its signal abort
 * with this error as the reason); `loop.run` on a cancelled run rejects with it.
 *
 * @example
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isRunCancelledError(e)) console.log(`cancelled: ${e.reason}`);
 *   else throw e;
 * });
 */
export class RunCancelledError extends LoomError {
  readonly runId: string;
  /** Why, as the canceller said. */
  readonly reason: string;
  constructor(runId: string, reason: string) {
    super(
      "runCancelled",
      `run ${runId} was cancelled (${reason}); a cancelled run is never resumed: start a new run, or fork this one from a step (forkRun, loom fork) to try again from there.`,
    );
    this.runId = runId;
    this.reason = reason;
  }
}

/**
 * True when `e` is a {@link RunCancelledError}: the run was cancelled (`cancelRun`) and is never
 * resumed.
 *
 * @example
 * ```ts
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isRunCancelledError(e)) return console.log(`run ${e.runId} was cancelled: ${e.reason}`);
 *   throw e;
 * });
 * ```
 */
export const isRunCancelledError = errorGuard(RunCancelledError, { codes: ["runCancelled"] });

/**
 * The run failed for good earlier: its journal ends with `run.failed` (an error that was not one of
 * Loom's own refusals ended it, once it had started). `loop.run` on it runs nothing and rejects with
 * this error, which carries the recorded one (`recorded`: its name, code and message). A failed run
 * is never resumed: start a new run, or fork this one from a step (`forkRun`, `loom fork`).
 *
 * @example
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isRunFailedError(e)) console.error(`run ${e.runId} failed earlier: ${e.recorded.message}`);
 *   else throw e;
 * });
 */
export class RunFailedError extends LoomError {
  readonly runId: string;
  /** The error the run failed with, as `run.failed` journaled it. */
  readonly recorded: { readonly name: string; readonly code?: string; readonly message: string };
  constructor(runId: string, recorded: { readonly name: string; readonly code?: string; readonly message: string }) {
    super(
      "runFailed",
      `run ${runId} failed (${recorded.name}: ${recorded.message}); a failed run is never resumed: start a new run, or fork this one from a step (forkRun, loom fork) to try again from there.`,
    );
    this.runId = runId;
    this.recorded = recorded;
  }
}

/**
 * True when `e` is a {@link RunFailedError}: the run's journal ends with `run.failed`.
 *
 * @example
 * await loop.run({ runId, journal }).catch((e) => {
 *   if (isRunFailedError(e)) console.log(`failed earlier: ${e.recorded.name}`);
 *   else throw e;
 * });
 */
export const isRunFailedError = errorGuard(RunFailedError, { codes: ["runFailed"] });

/**
 * A run's tool source (an MCP server, `toolSources`) could not list its tools when the run needed
 * the list (its start, or the first resume after the source was added). Nothing was appended:
 * make the source reachable and run again. A run whose list is journaled never asks again.
 *
 * @example
 * await loop.run({ runId, journal, input }).catch((e) => {
 *   if (isToolSourceError(e)) console.error(`MCP server ${e.source} is down: ${e.message}`);
 *   throw e;
 * });
 */
export class ToolSourceError extends LoomError {
  readonly runId: string;
  /** The source's name (`mcpTools(client, { server })`: the server's). */
  readonly source: string;
  constructor(runId: string, source: string, cause: unknown, what?: string) {
    const why = what ?? `listing its tools failed: ${cause instanceof Error ? cause.message : String(cause)}`;
    super(
      "toolSource",
      `run ${runId}: tool source "${source}": ${why}. Nothing was journaled; make the source reachable (start the MCP server, check its connection) and run again.`,
      { cause },
    );
    this.runId = runId;
    this.source = source;
  }
}

/**
 * True when `e` is a {@link ToolSourceError}: a tool source (an MCP server) could not list its
 * tools; nothing was journaled.
 *
 * @example
 * ```ts
 * await loop.run({ runId, journal, input }).catch((e) => {
 *   if (isToolSourceError(e)) console.error(`MCP server ${e.source} is down: ${e.message}`);
 *   throw e;
 * });
 * ```
 */
export const isToolSourceError = errorGuard(ToolSourceError, { codes: ["toolSource"] });

/** Why a run snapshot was not used (`SnapshotError.code`). */
export type SnapshotErrorCode =
  | "snapshotDigestMismatch"
  | "snapshotUnreadable"
  | "snapshotStale"
  | "snapshotWriteFailed";

/**
 * A run snapshot (the folded state a resume starts from) that was not trusted, or could not be
 * written. Never thrown at a run: the reader folds the whole journal instead and hands this to
 * its warning hook (`snapshots.onWarning`, `foldRun(..., { onSnapshotWarning })`), so the run's
 * outcome never depends on a snapshot.
 *
 * @example
 * agentLoop$({ id: "support", model, snapshots: { every: 500, onWarning: (e) => log.warn(e.code, e.message) } });
 */
export class SnapshotError extends LoomError {
  declare readonly code: SnapshotErrorCode;
  readonly runId: string;
  /** The seq the snapshot was taken at. */
  readonly seq: number;
  constructor(code: SnapshotErrorCode, runId: string, seq: number, message: string, options?: { cause?: unknown }) {
    super(code, `run ${runId} snapshot at seq ${seq}: ${message}`, options);
    this.runId = runId;
    this.seq = seq;
  }
}

/**
 * True when `e` is a {@link SnapshotError}: a snapshot ignored (the whole journal was folded
 * instead) or one that could not be written.
 *
 * @example
 * ```ts
 * const state = await foldRun(journal, "run-1", {
 *   onSnapshotWarning: (e) => isSnapshotError(e) && console.warn(e.code, e.message),
 * });
 * ```
 */
export const isSnapshotError = errorGuard(SnapshotError, {
  codes: codesOf<SnapshotErrorCode>({
    snapshotDigestMismatch: true,
    snapshotUnreadable: true,
    snapshotStale: true,
    snapshotWriteFailed: true,
  }),
});

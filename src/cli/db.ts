import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  describeCause,
  type ErrorCause,
  foldEntries,
  type InterruptReason,
  isJournalFileError,
  type JournalEntry,
  type OpenJournal,
  openSqliteJournal,
  parseFrameId,
  type RunActivity,
  type RunState,
  readJournal,
  recordedModePin,
  type SqliteOptions,
  type ToolCallLogMode,
} from "../index.ts";
import { tokenUsage } from "../projections/usage.ts";
import { CliError } from "./io.ts";
import { type JournalSource, withPostgresJournal } from "./journalSource.ts";
import { runsFromClone } from "./packageRoot.ts";

export { DEFAULT_DB, dbPath, type JournalSource, journalSource } from "./journalSource.ts";

/**
 * Opens an existing journal, runs `fn`, closes it: a SQLite file (its path, or a source of kind
 * `sqlite`) or a PostgreSQL database (`journalSource`). A missing file is an error here (opening
 * would create an empty one): only `loom demo` makes a journal; so is a PostgreSQL schema without
 * Loom's tables. Commands that only read open a file read-only (nothing in the file or its folder
 * changes; a read-only file works); commands that write open only a file that already is a Loom
 * journal. Either way a file that is not one (another application's database) is refused,
 * untouched, with an error naming it.
 */
export const withJournal = <T>(source: JournalSource | string, fn: (journal: OpenJournal) => Promise<T>): Promise<T> =>
  opened(source, { readonly: true }, fn);

/** {@link withJournal} for commands that write (`compact`, `resume`, `approve`…). */
export const withWritableJournal = <T>(
  source: JournalSource | string,
  fn: (journal: OpenJournal) => Promise<T>,
): Promise<T> => opened(source, { create: false }, fn);

function opened<T>(
  source: JournalSource | string,
  options: SqliteOptions,
  fn: (journal: OpenJournal) => Promise<T>,
): Promise<T> {
  if (typeof source === "string") return openedFor(source, options, fn);
  return source.kind === "sqlite" ? openedFor(source.path, options, fn) : withPostgresJournal(source, fn);
}

async function openedFor<T>(
  path: string,
  options: SqliteOptions,
  fn: (journal: OpenJournal) => Promise<T>,
): Promise<T> {
  if (!existsSync(path)) {
    throw new CliError(
      "noJournal",
      `no journal at ${path}: run \`${runsFromClone() ? "npm run demo" : "npx loom demo"}\` to make one, or pass --db <file> (the SQLite file your program journals to)`,
    );
  }
  if (statSync(path).isDirectory()) {
    throw new CliError(
      "journalUnreadable",
      `${path} is a folder: --db takes the journal's file (for example ${join(path, "loom.db")})`,
    );
  }
  const journal = openJournalFile(path, options);
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
}

/** `openSqliteJournal`, its file errors told in the command's terms (`--db`). */
export function openJournalFile(path: string, options: SqliteOptions): OpenJournal {
  try {
    return openSqliteJournal(path, options);
  } catch (e) {
    if (!isJournalFileError(e)) throw e;
    const hint =
      e.code === "notAJournal" || e.code === "journalUnreadable"
        ? " (--db <file> names the journal; the default is ./loom.db)"
        : "";
    throw new CliError(e.code, `${e.message}${hint}`, { cause: e });
  }
}

/** A run's entries (validated); an unknown run id is an error that says how to list them. */
export async function readRun(journal: OpenJournal, runId: string, path: string): Promise<JournalEntry[]> {
  const entries = await readJournal(journal, runId);
  if (entries.length === 0) {
    throw new CliError("unknownRun", `no run "${runId}" in ${path}; \`loom runs\` lists the runs it holds`);
  }
  return entries;
}

/** The bytes an entry takes in the journal: its type, data and meta as stored (UTF-8 JSON text). */
export const entryBytes = (entry: Pick<JournalEntry, "type" | "data" | "meta">): number =>
  Buffer.byteLength(entry.type) +
  Buffer.byteLength(JSON.stringify(entry.data)) +
  Buffer.byteLength(JSON.stringify(entry.meta));

export interface RunInfo {
  readonly runId: string;
  readonly loopId: string | undefined;
  /** The journal's status (`running` for every run whose journal does not end). */
  readonly status: RunState["status"];
  /** What the run is doing: `running`, `stalled`, `not-started`, `answered`… (`runActivity`). */
  readonly activity: RunActivity;
  /** Model calls recorded (completed model frames). */
  readonly iterations: number;
  /** The log's recorded shape: the mode pin, or "full" when none was journaled. */
  readonly mode: ToolCallLogMode;
  readonly entries: number;
  /** The last seq (more than `entries` after a compaction). */
  readonly version: number;
  readonly bytes: number;
  readonly startedAt: string | undefined;
  readonly updatedAt: string | undefined;
  /** Tokens the run's model calls used (their recorded usage, summed). */
  readonly tokens: { readonly input: number; readonly output: number };
  /** Why an interrupted run stopped, and the model's error for a `model-error`. */
  readonly interrupted?: { readonly reason: InterruptReason; readonly cause?: ErrorCause };
  /** Why a cancelled run was cancelled (`cancelRun`). */
  readonly cancelled?: { readonly reason: string };
}

/**
 * What `loom runs` shows of a run, from its entries and its activity (`runActivity`: see
 * `runInfoOf`, which reads it); without one, the journal's status stands for it.
 */
export function runInfo(runId: string, entries: readonly JournalEntry[], activity?: RunActivity): RunInfo {
  const state = foldEntries(entries);
  return {
    runId,
    loopId: state.loopId,
    status: state.status,
    activity: activity ?? state.status,
    iterations: modelCalls(state),
    mode: recordedModePin(state) ?? "full",
    entries: entries.length,
    version: state.version,
    bytes: entries.reduce((sum, e) => sum + entryBytes(e), 0),
    startedAt: entries[0]?.meta.at,
    updatedAt: entries.at(-1)?.meta.at,
    tokens: tokensOf(state),
    ...(state.status === "interrupted" && state.interruption
      ? { interrupted: { reason: state.interruption.reason, cause: state.interruption.cause } }
      : {}),
    ...(state.status === "cancelled" && state.cancelled ? { cancelled: { reason: state.cancelled.reason } } : {}),
  };
}

/**
 * Why a run stopped, on one line for text output: `model-error: AI_APICallError (status 401, not
 * retryable): Unauthorized`, the reason alone without a cause, "" for a run that did not stop.
 * Control characters in the error's text are escaped (`\u001b`), so it cannot drive the terminal.
 */
export function stoppedText(info: RunInfo): string {
  const i = info.interrupted;
  const text =
    i === undefined
      ? info.cancelled === undefined
        ? ""
        : `cancelled: ${info.cancelled.reason}`
      : i.cause === undefined
        ? i.reason
        : `${i.reason}: ${describeCause(i.cause)}`;
  return text.replace(/\p{Cc}/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** The run's token usage as `loom runs` shows it (archived model frames are not read back for a listing). */
function tokensOf(state: RunState): RunInfo["tokens"] {
  const usage = tokenUsage(state);
  return { input: usage.inputTokens, output: usage.outputTokens };
}

/** Completed model frames: the model calls a run made. */
export const modelCalls = (state: RunState): number =>
  Object.values(state.frames).filter((f) => f.status === "completed" && parseFrameId(f.frameId)?.kind === "model")
    .length;

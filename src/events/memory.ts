import { ConcurrencyError, JournalFormatError } from "../core/errors.ts";
import { NOT_PLAIN, plainJsonCopy } from "../core/jsonForm.ts";
import { checkRunId } from "./ids.ts";
import { acquisition, cancelRefusal, leaseOf, liveHolder, lost, type OwnerRow, stillOwned } from "./ownership.ts";
import type {
  AcquireOptions,
  AppendOptions,
  CompactRequest,
  EventStore,
  ListRunsOptions,
  RunLease,
  RunSummary,
  StoredSnapshot,
} from "./store.ts";
import { type EntryMeta, type JournalEntry, type NewEntry, SCHEMA_VERSION } from "./types.ts";
import { checkNewEntries, dataText } from "./validate.ts";
import { AppendWatchers } from "./watch.ts";

/** How `memoryStore` keeps entries. */
export interface MemoryStoreOptions {
  /**
   * Keep each entry as JSON text and parse a fresh copy on every read, exactly as a JSON store
   * does (a Date comes back as its string, a Map as `{}`, and the copies are yours to change).
   * Default false: entries are parsed once at append and handed out deeply frozen, which reads
   * faster and gives back the same JSON form, but shared and read-only.
   */
  readonly json?: boolean;
}

/** What the store keeps per entry: the text (json mode) or the frozen parsed entry. */
interface Kept {
  readonly seq: number;
  readonly type: string;
  readonly text?: { readonly data: string; readonly meta: string };
  readonly entry?: JournalEntry;
}

/**
 * An in-process `EventStore`, for tests and short-lived runs. Every append goes through
 * `JSON.stringify`, so what comes back is the JSON form of what went in in both modes (see
 * {@link MemoryStoreOptions.json}), and data with no JSON form is refused as a SQL store would.
 *
 * @example
 * const store = memoryStore({ json: true });
 * await store.append("run-1", [{ type: "run.started", data: { loopId: "demo", input: "hi", tools: [] } }], { expectedVersion: 0 });
 * (await store.read("run-1"))[0]?.seq; // 1
 */
export function memoryStore(options: MemoryStoreOptions = {}): EventStore {
  const json = options.json === true;
  const streams = new Map<string, Kept[]>();
  const owners = new Map<string, OwnerRow>();
  const watchers = new AppendWatchers();
  /** Cancel requests by run: the reason (see `requestCancel`). */
  const cancels = new Map<string, string>();
  /** The latest snapshot of each run (`writeSnapshot`). */
  const snapshots = new Map<string, StoredSnapshot>();

  const version = (kept: Kept[] | undefined) =>
    kept === undefined || kept.length === 0 ? 0 : kept[kept.length - 1]!.seq;

  const check = (runId: string, kept: Kept[] | undefined, expected: number) => {
    const actual = version(kept);
    if (actual !== expected) throw new ConcurrencyError(runId, expected, actual);
  };

  // Builds everything before touching the stream, so a failure appends nothing.
  const keep = (runId: string, entries: readonly NewEntry[], after: number): Kept[] => {
    const at = new Date().toISOString();
    const metaText = json ? JSON.stringify({ v: SCHEMA_VERSION, at } satisfies EntryMeta) : "";
    return entries.map((e, i) => {
      const seq = after + i + 1;
      if (json) return { seq, type: e.type, text: { data: dataText(runId, e, seq), meta: metaText } };
      // Plain data is copied to its JSON form and frozen in one walk; anything else goes through its text.
      let data = plainData(e.data);
      if (data === NOT_PLAIN) data = deepFreeze(JSON.parse(dataText(runId, e, seq)));
      const meta: EntryMeta = Object.freeze({ v: SCHEMA_VERSION, at });
      const entry = Object.freeze({ runId, seq, type: e.type, data, meta }) as JournalEntry;
      return { seq, type: e.type, entry };
    });
  };

  const entryOf = (runId: string, k: Kept): JournalEntry => {
    if (k.entry !== undefined) return k.entry;
    const t = k.text!;
    return { runId, seq: k.seq, type: k.type, data: JSON.parse(t.data), meta: JSON.parse(t.meta) } as JournalEntry;
  };

  return {
    async append(runId: string, entries: readonly NewEntry[], { expectedVersion, fence }: AppendOptions) {
      checkRunId(runId, "append");
      checkNewEntries(runId, entries, expectedVersion);
      if (fence !== undefined) {
        if (!stillOwned(owners.get(runId), fence)) throw lost(runId, fence, owners.get(runId));
        const cancelled = cancelRefusal(runId, cancels.get(runId), entries);
        if (cancelled) throw cancelled;
      }
      const kept = streams.get(runId);
      check(runId, kept, expectedVersion);
      const added = keep(runId, entries, expectedVersion);
      if (kept === undefined) {
        if (added.length > 0) streams.set(runId, added);
      } else {
        for (const k of added) kept.push(k);
      }
      if (added.length > 0) watchers.notify(runId);
      return { version: expectedVersion + added.length };
    },

    async read(runId: string, readOptions?: { from?: number }) {
      checkRunId(runId, "read");
      const kept = streams.get(runId);
      if (kept === undefined) return [];
      const from = readOptions?.from ?? 1;
      const out: JournalEntry[] = [];
      for (let i = firstAtOrAfter(kept, from); i < kept.length; i++) out.push(entryOf(runId, kept[i]!));
      return out;
    },

    async listRuns(options?: ListRunsOptions) {
      const runs: RunSummary[] = [];
      for (const [runId, kept] of streams) {
        if (options?.prefix !== undefined && !runId.startsWith(options.prefix)) continue;
        const last = kept[kept.length - 1]!;
        runs.push({ runId, version: last.seq, lastType: last.type, entries: kept.length });
      }
      return runs.sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0));
    },

    async compact(runId: string, request: CompactRequest) {
      checkRunId(runId, "compact");
      checkNewEntries(runId, [request.marker], request.expectedVersion);
      const kept = streams.get(runId);
      check(runId, kept, request.expectedVersion);
      const remove = new Set(request.removeSeqs);
      const present = kept?.filter((k) => remove.has(k.seq)).length ?? 0;
      if (present !== remove.size) {
        const missing = request.removeSeqs.find((s) => !kept?.some((k) => k.seq === s));
        throw new JournalFormatError(
          runId,
          missing,
          "removeSeqs",
          "no entry at this seq to remove; re-read the run and compact again",
        );
      }
      const [marker] = keep(runId, [request.marker], request.expectedVersion);
      const next = (kept ?? []).filter((k) => !remove.has(k.seq));
      next.push(marker!);
      streams.set(runId, next);
      return { version: request.expectedVersion + 1 };
    },

    async acquire(runId: string, options: AcquireOptions) {
      const row = acquisition(runId, owners.get(runId), options, Date.now());
      owners.set(runId, row);
      return leaseOf(runId, row, cancels.get(runId));
    },

    async renew(lease: RunLease, leaseMs: number) {
      const row = owners.get(lease.runId);
      if (!stillOwned(row, lease.token)) throw lost(lease.runId, lease.token, row);
      const renewed = { ...row!, expiresAt: Date.now() + leaseMs };
      owners.set(lease.runId, renewed);
      return leaseOf(lease.runId, renewed, cancels.get(lease.runId));
    },

    async release(lease: RunLease) {
      const row = owners.get(lease.runId);
      if (stillOwned(row, lease.token))
        owners.set(lease.runId, { token: lease.token, owner: null, host: null, pid: null, expiresAt: 0 });
    },

    watch(runId: string, onAppend: () => void) {
      return watchers.add(runId, onAppend);
    },

    async requestCancel(runId: string, reason: string) {
      checkRunId(runId, "requestCancel");
      if (!cancels.has(runId)) cancels.set(runId, reason);
      return { holder: liveHolder(owners.get(runId), Date.now()) };
    },

    async holder(runId: string) {
      return liveHolder(owners.get(runId), Date.now());
    },

    async writeSnapshot(runId: string, snapshot: StoredSnapshot) {
      checkRunId(runId, "writeSnapshot");
      const known = snapshots.get(runId);
      if (known === undefined || known.seq < snapshot.seq) {
        snapshots.set(runId, { seq: snapshot.seq, digest: snapshot.digest, body: snapshot.body });
      }
    },

    async latestSnapshot(runId: string) {
      checkRunId(runId, "latestSnapshot");
      return snapshots.get(runId);
    },

    async close() {},
  };
}

/** Index of the first entry with seq ≥ from (entries are in seq order, with gaps after compaction). */
function firstAtOrAfter(kept: readonly Kept[], from: number): number {
  let lo = 0;
  let hi = kept.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (kept[mid]!.seq < from) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The frozen JSON form of plain data (undefined, which has none, is left to `dataText` to refuse). */
function plainData(data: unknown): unknown {
  try {
    const copy = plainJsonCopy(data, true);
    return copy === undefined ? NOT_PLAIN : copy;
  } catch {
    return NOT_PLAIN; // a getter threw: dataText names the entry
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const k of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[k]);
  }
  return value;
}

import { canonicalJsonOfParsed } from "../../core/canonicalJson.ts";
import { digestOf } from "../../core/digest.ts";
import { errorGuard, LoomError } from "../../core/errors.ts";
import type { KeyProvider } from "../codec/codec.ts";
import { decodingLike, ENCODED_MARK, payloadFieldsOf } from "../codec/codecStore.ts";
import type { BlobStore, Journal } from "../spi.ts";
import type { EventStore } from "../store.ts";
import type { EntryType, NewEntry } from "../types.ts";
import { keyedDigestKeyId, keyedDigestOf, matchesKeyedDigest } from "./redactDigest.ts";
import { type KeepOriginalsOptions, markRedacting, originalsKeeper, sealOriginals } from "./redactedOriginals.ts";
import { keepBlobOriginal, REDACTED_MARK, type RedactionRecord, redactedFields } from "./redactionRecords.ts";
import { compileValues, type RedactionValue, redactValues } from "./redactValues.ts";

// What a redaction leaves in an entry is read by every fold; it is part of the redaction's API too.
export { REDACTED_MARK, type RedactionRecord, redactedFields } from "./redactionRecords.ts";

/**
 * Redaction: fields of what the journal stores (run inputs, model responses, tool
 * outputs, settled calls' results, the run's value) replaced before they reach the store, by
 * JSON path and/or by a function. Each redacted field is journaled as redacted, with the digest
 * of the ORIGINAL (`digestOf`, as a frame's digest is computed) and the concrete paths replaced,
 * in `data.redacted`:
 *
 *   `{ frameId, digest, bytes, output: { email: "[redacted]", … }, redacted: [{ field: "output", digest, bytes, paths: ["$['email']"], fn: false }] }`
 *
 * so an auditor holding the original verifies it with {@link verifyRedacted}. A tool frame's own
 * `digest`/`bytes` stay the runtime's (over the original): the lean log is the same with or
 * without redaction. Redaction runs before the codec encodes (`withRedaction(withCodec(j, codec), r)`).
 */

/** Why a redaction could not be set up or applied. */
export type RedactionErrorCode =
  | "badRedactionPath"
  | "badRedactionValue"
  | "redactionFailed"
  | "redactAfterEncode"
  | "digestKeyMissing";

/**
 * A redaction that cannot be set up or applied: a path outside the supported JSONPath subset
 * (`badRedactionPath`, `path` names it), a value that is empty or a pattern that matches the empty
 * string (`badRedactionValue`), a keyed digest whose key the provider does not give
 * (`digestKeyMissing`; nothing is written), a redaction function that threw or returned a value with
 * no JSON form (`redactionFailed`; nothing is written), or a redaction placed under the codec, so
 * that it would see encoded data (`redactAfterEncode`).
 */
export class RedactionError extends LoomError {
  declare readonly code: RedactionErrorCode;
  /** The path involved (`badRedactionPath`). */
  readonly path: string | undefined;
  constructor(code: RedactionErrorCode, message: string, path?: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.path = path;
  }
}

/**
 * True when `e` is a {@link RedactionError}.
 *
 * @example
 * try {
 *   redaction({ paths: ["$.a["] });
 * } catch (e) {
 *   if (isRedactionError(e)) console.error(e.code, e.path); // "badRedactionPath", "$.a["
 * }
 */
export const isRedactionError = errorGuard(RedactionError);

/** One step of a parsed path. */
type Step =
  | { readonly kind: "member"; readonly name: string }
  | { readonly kind: "index"; readonly index: number }
  | { readonly kind: "wildcard" }
  | { readonly kind: "descend"; readonly name: string };

/**
 * Parses a path of the supported JSONPath subset: `$` then any of `.name`, `['name']` (or
 * `["name"]`), `[0]`, `[*]`, `.*` and `..name` (that member at any depth). Filters, slices,
 * unions and script expressions are refused (`badRedactionPath`).
 */
function parsePath(path: string): readonly Step[] {
  const bad = (at: number, what: string): never => {
    throw new RedactionError(
      "badRedactionPath",
      `redaction path ${JSON.stringify(path)}: ${what} at character ${at}; supported: $, .name, ['name'], [0], [*], .*, ..name`,
      path,
    );
  };
  if (!path.startsWith("$")) bad(0, "it must start with $");
  const steps: Step[] = [];
  const ident = /^[A-Za-z_$][A-Za-z0-9_$-]*/;
  let i = 1;
  while (i < path.length) {
    const rest = path.slice(i);
    if (rest.startsWith("..")) {
      const m = ident.exec(rest.slice(2));
      if (!m) bad(i + 2, "`..` takes a member name");
      steps.push({ kind: "descend", name: (m as RegExpExecArray)[0] });
      i += 2 + (m as RegExpExecArray)[0].length;
    } else if (rest.startsWith(".*")) {
      steps.push({ kind: "wildcard" });
      i += 2;
    } else if (rest.startsWith(".")) {
      const m = ident.exec(rest.slice(1));
      if (!m) bad(i + 1, "`.` takes a member name (use ['name'] for other characters)");
      steps.push({ kind: "member", name: (m as RegExpExecArray)[0] });
      i += 1 + (m as RegExpExecArray)[0].length;
    } else if (rest.startsWith("[*]")) {
      steps.push({ kind: "wildcard" });
      i += 3;
    } else if (/^\[\d+\]/.test(rest)) {
      const m = /^\[(\d+)\]/.exec(rest) as RegExpExecArray;
      steps.push({ kind: "index", index: Number(m[1]) });
      i += m[0].length;
    } else if (/^\[(['"])/.test(rest)) {
      const quote = rest[1] as string;
      let j = 2;
      let name = "";
      while (j < rest.length && rest[j] !== quote) {
        if (rest[j] === "\\" && j + 1 < rest.length) j++;
        name += rest[j];
        j++;
      }
      if (rest[j] !== quote || rest[j + 1] !== "]") bad(i, "an unclosed ['name']");
      steps.push({ kind: "member", name });
      i += j + 2;
    } else {
      bad(i, `unexpected ${JSON.stringify(rest[0])}`);
    }
  }
  if (steps.length === 0) bad(1, "the root itself cannot be replaced (name a member: $.name)");
  return steps;
}

/** A concrete path, as journaled: `$['hits'][0]['email']`. */
const pathText = (at: readonly (string | number)[]): string =>
  `$${at.map((k) => (typeof k === "number" ? `[${k}]` : `['${k.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}']`)).join("")}`;

type Json = Record<string, unknown> | unknown[];
const isContainer = (v: unknown): v is Json => typeof v === "object" && v !== null;

/** Every concrete location `steps` selects in `value` (existing members and elements only). */
function locate(value: unknown, steps: readonly Step[]): (string | number)[][] {
  let at: { node: unknown; path: (string | number)[] }[] = [{ node: value, path: [] }];
  for (const step of steps) {
    const next: typeof at = [];
    for (const { node, path } of at) {
      if (!isContainer(node)) continue;
      if (step.kind === "member") {
        if (!Array.isArray(node) && Object.hasOwn(node, step.name))
          next.push({ node: node[step.name], path: [...path, step.name] });
      } else if (step.kind === "index") {
        if (Array.isArray(node) && step.index < node.length)
          next.push({ node: node[step.index], path: [...path, step.index] });
      } else if (step.kind === "wildcard") {
        if (Array.isArray(node))
          node.forEach((v, k) => {
            next.push({ node: v, path: [...path, k] });
          });
        else for (const k of Object.keys(node)) next.push({ node: node[k], path: [...path, k] });
      } else {
        const walk = (n: unknown, p: (string | number)[]) => {
          if (!isContainer(n)) return;
          if (Array.isArray(n))
            n.forEach((v, k) => {
              walk(v, [...p, k]);
            });
          else
            for (const k of Object.keys(n)) {
              if (k === step.name) next.push({ node: n[k], path: [...p, k] });
              else walk(n[k], [...p, k]);
            }
        };
        walk(node, path);
      }
    }
    at = next;
  }
  return at.map((a) => a.path);
}

/** `value` (a JSON copy) with each location replaced, in place. */
function replaceAt(value: unknown, locations: readonly (readonly (string | number)[])[], replacement: unknown): void {
  for (const loc of locations) {
    let node = value as Record<string | number, unknown>;
    for (const key of loc.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
    node[loc.at(-1) as string | number] = replacement;
  }
}

/** Parses a journaled concrete path (`$['a'][0]`) back into its keys. */
function concreteKeys(path: string): (string | number)[] {
  return parsePath(path).map((s) => {
    if (s.kind === "member") return s.name;
    if (s.kind === "index") return s.index;
    throw new RedactionError("badRedactionPath", `${path} is not a concrete path`, path);
  });
}

/** Where a payload is: handed to a redaction function, so it can tell a tool's output from a run's input. */
export interface RedactionContext {
  readonly runId: string;
  /** The entry's type (`run.started`, `frame.completed`…), or `"blob"` for a claim-checked output's bytes (then `runId` is `"(blob)"`: a blob is put before its frame names it). */
  readonly type: EntryType | "blob";
  /** The data field: `input`, `output` or `result`. */
  readonly field: string;
  /** The frame (`<loop>#turn:<i>:tool:<j>`, `…:model`) or settled step, when the entry has one. */
  readonly stepId?: string;
}

/** What {@link redaction} is asked for. */
export interface RedactionOptions {
  /**
   * Values replaced wherever they appear in a payload's strings (member names too), at any depth
   * and whatever the path: RegExps (every match) and literal strings. The way to keep a value out
   * of the journal when the model may repeat it (its answer, a later tool call's input, a summary).
   * Each match is replaced with `replacement` when that is a string, else `"[redacted]"`.
   * Strings that are digests or blob refs (64 hex digits) are left as they are, and numbers too
   * (a PIN returned as a JSON number needs a path).
   */
  readonly values?: readonly RedactionValue[];
  /** JSON paths replaced wherever they match, in every payload (`$..email`, `$.headers['x-api-key']`, `$.rows[*].ssn`). */
  readonly paths?: readonly string[];
  /**
   * Called with a copy of each payload (after `paths`): return it changed (mutating it is fine)
   * or as it is. Anything it changes is redacted, recorded without paths (`fn: true`).
   */
  readonly redact?: (value: unknown, at: RedactionContext) => unknown;
  /** What a matched path is replaced with (default `"[redacted]"`). */
  readonly replacement?: unknown;
  /**
   * How the original is digested in the redaction record. Default: plain `digestOf` (sha256 of
   * its canonical JSON) and its byte length, which anyone can check a guess against (a redacted
   * 6-digit PIN is found by hashing the million candidates). `{ keys }`: HMAC-SHA256 under the
   * provider's current key (`hmac-sha256:<keyId>:<hex>`) and no length, and a tool frame whose
   * output was redacted records that keyed digest too: only whoever holds the key checks an
   * original (`verifyRedacted(original, entry, { key })`).
   */
  readonly digest?: { readonly keys: KeyProvider };
}

/** A configured redaction: {@link withRedaction} applies it. */
export interface Redaction {
  readonly options: RedactionOptions;
  /** `value` redacted, with its record; undefined when nothing in it is redacted. */
  apply(value: unknown, at: RedactionContext): Promise<{ value: unknown; record: RedactionRecord } | undefined>;
}

/**
 * A redaction: values (patterns and literal strings, found in any string of any payload), paths
 * (a small JSONPath subset) and/or a function, applied in the order paths, values, function.
 * Paths and values are checked here: a path outside the subset throws `RedactionError`
 * (`badRedactionPath`), an empty value or a pattern that matches the empty string
 * `badRedactionValue`.
 *
 * @example
 * const r = redaction({
 *   values: [/\b\d{3}-\d{2}-\d{4}\b/, customer.email], // wherever they appear: outputs, answers, summaries
 *   paths: ["$..card.number"],
 * });
 * const journal = withRedaction(openSqliteJournal("./loom.db"), r);
 */
export function redaction(options: RedactionOptions): Redaction {
  const parsed = (options.paths ?? []).map(parsePath);
  const replacement = options.replacement === undefined ? "[redacted]" : options.replacement;
  const { patterns, problem } = compileValues(options.values ?? []);
  if (problem !== undefined)
    throw new RedactionError(
      "badRedactionValue",
      `redaction values: ${problem}; give a non-empty string or a pattern that matches at least one character`,
    );
  const valueText = typeof replacement === "string" ? replacement : "[redacted]";
  return {
    options,
    async apply(value, at) {
      if (value === undefined) return undefined;
      let copy: unknown = JSON.parse(JSON.stringify(value));
      const found = new Map<string, (string | number)[]>();
      for (const steps of parsed) for (const loc of locate(copy, steps)) found.set(pathText(loc), loc);
      replaceAt(copy, [...found.values()], replacement);
      const matched = redactValues(copy, patterns, valueText);
      copy = matched.value;
      let fn = false;
      if (options.redact !== undefined) {
        const before = canonicalJsonOfParsed(copy);
        let out: unknown;
        try {
          out = options.redact(JSON.parse(before), at);
        } catch (cause) {
          throw new RedactionError(
            "redactionFailed",
            `run ${at.runId}: the redaction function threw on ${describe(at)}: ${String((cause as Error)?.message ?? cause)}; nothing was written`,
            undefined,
            { cause },
          );
        }
        const after = digestOf(out);
        if (after.digest === null) {
          throw new RedactionError(
            "redactionFailed",
            `run ${at.runId}: the redaction function returned a value with no JSON form for ${describe(at)}; return JSON data`,
          );
        }
        if (canonicalJsonOfParsed(JSON.parse(JSON.stringify(out))) !== before) {
          fn = true;
          copy = JSON.parse(JSON.stringify(out));
        }
      }
      if (found.size === 0 && matched.count === 0 && !fn) return undefined;
      const keys = options.digest?.keys;
      const original =
        keys === undefined
          ? digestOf(value)
          : {
              digest: await keyedDigestOf(
                value,
                keys,
                (why, keyId) =>
                  new RedactionError(
                    "digestKeyMissing",
                    `run ${at.runId}: cannot digest the original of ${describe(at)}: ${why}; give the redaction's key provider a 32-byte key ${JSON.stringify(keyId)} (nothing was written)`,
                  ),
              ),
            };
      const record: RedactionRecord = {
        field: at.field,
        ...original,
        paths: [...found.keys()].sort(),
        fn,
        ...(matched.count > 0 ? { values: matched.count } : {}),
      };
      return { value: copy, record };
    },
  };
}

const describe = (at: RedactionContext) => `${at.type} ${at.field}${at.stepId === undefined ? "" : ` of ${at.stepId}`}`;

const stepOf = (data: Record<string, unknown>): string | undefined =>
  typeof data.frameId === "string" ? data.frameId : typeof data.stepId === "string" ? data.stepId : undefined;

/** Pending blob redactions, by the ref the redacted blob got: the frame that names it records them. */
type BlobRecords = Map<string, RedactionRecord>;

async function redactEntry(redactor: Redaction, runId: string, entry: NewEntry, blobs: BlobRecords): Promise<NewEntry> {
  const data = entry.data as Record<string, unknown>;
  if (typeof data !== "object" || data === null) return entry;
  if (data[ENCODED_MARK] !== undefined) {
    throw new RedactionError(
      "redactAfterEncode",
      `run ${runId}: the redaction got an entry the codec had already encoded (${entry.type}); redact first: withRedaction(withCodec(journal, codec), redaction)`,
    );
  }
  const fields = payloadFieldsOf(entry);
  if (fields === undefined) return entry;
  const records: RedactionRecord[] = [];
  let out: Record<string, unknown> | undefined;
  if (entry.type === "frame.completed" && data.claimChecked === true) {
    const ref = (data.output as { ref?: unknown } | undefined)?.ref;
    const record = typeof ref === "string" ? blobs.get(ref) : undefined;
    if (record !== undefined) {
      blobs.delete(ref as string);
      records.push(record);
      out = { ...data };
    }
  } else {
    for (const field of fields) {
      if (data[field] === undefined) continue;
      const stepId = stepOf(data);
      const at: RedactionContext = { runId, type: entry.type as EntryType, field, ...(stepId ? { stepId } : {}) };
      const done = await redactor.apply(data[field], at);
      if (done === undefined) continue;
      out ??= { ...data };
      out[field] = done.value;
      records.push(done.record);
    }
  }
  if (out === undefined) return entry;
  // A keyed digest: the tool frame's own digest (the lean log's, over the original) is keyed too.
  const output = records.find((r) => r.field === "output" && r.blob === undefined);
  if (
    entry.type === "frame.completed" &&
    typeof data.digest === "string" &&
    keyedDigestKeyId(output?.digest) !== undefined
  )
    out.digest = output?.digest;
  out[REDACTED_MARK] = records;
  return { ...entry, data: out } as NewEntry;
}

/**
 * The store with `redaction` applied to every entry appended (reads are untouched: they hand back
 * what was stored, redacted). A redaction that fails throws before the append: nothing is written.
 *
 * @example
 * const store = redactingStore(sqliteStore("./loom.db"), redaction({ paths: ["$..password"] }));
 */
export function redactingStore(store: EventStore, redactor: Redaction): EventStore {
  return redactingStoreWith(store, redactor, new Map());
}

/** What a redacting store made of each entry it changed, by the entry it was given. */
const storedForms = new WeakMap<NewEntry, NewEntry>();

/**
 * `entry` as the journal keeps it: the form a redacting store appended in its place, or the entry
 * itself when no redaction changed it. Lets the run's own readers of its appends (telemetry) see
 * the redacted form, with its redaction records and keyed digests, rather than the original.
 *
 * @example
 * await redactingStore(store, r).append(runId, [entry], { expectedVersion: 0 });
 * redactedFields(storedFormOf(entry).data); // the records of what was redacted
 */
export function storedFormOf(entry: NewEntry): NewEntry {
  return storedForms.get(entry) ?? entry;
}

/** `seal` keeps the originals of what redaction changed (the entry before, the entry after). */
type Seal = (runId: string, original: NewEntry, redacted: NewEntry) => Promise<NewEntry>;

function redactingStoreWith(store: EventStore, redactor: Redaction, blobRecords: BlobRecords, seal?: Seal): EventStore {
  const wrapped: EventStore = {
    ...bound(store),
    async append(runId, entries, options) {
      const out: NewEntry[] = [];
      let changed = false;
      for (const e of entries) {
        const redacted = await redactEntry(redactor, runId, e, blobRecords);
        const kept = seal === undefined || redacted === e ? redacted : await seal(runId, e, redacted);
        if (kept !== e) {
          changed = true;
          storedForms.set(e, kept);
        }
        out.push(kept);
      }
      const appended = await store.append(runId, out, options);
      // The run's listeners (its stream, its spans) are told what readers see: the redacted entries.
      return changed ? { version: appended.version, stored: out } : appended;
    },
  };
  return wrapped;
}

/** The store's methods bound to it, optional ones only when it has them. */
function bound(store: EventStore): EventStore {
  const out: EventStore = {
    append: (runId, entries, options) => store.append(runId, entries, options),
    read: (runId, options) => store.read(runId, options),
    listRuns: (options) => store.listRuns(options),
    acquire: (runId, options) => store.acquire(runId, options),
    renew: (lease, leaseMs) => store.renew(lease, leaseMs),
    release: (lease) => store.release(lease),
    requestCancel: (runId, reason) => store.requestCancel(runId, reason),
    compact: (runId, request) => store.compact(runId, request),
    close: () => store.close(),
  };
  if (store.holder) out.holder = store.holder.bind(store);
  if (store.prune) out.prune = store.prune.bind(store);
  if (store.watch) out.watch = store.watch.bind(store);
  return out;
}

/**
 * Blobs (claim-checked outputs) redacted as they are put: a blob of JSON is redacted like an
 * output and stored redacted (it gets the ref of the redacted bytes, which the claim-check
 * envelope then names); the frame that names it journals the record.
 */
function redactingBlobs(blobs: BlobStore, redactor: Redaction, records: BlobRecords): BlobStore {
  const store: BlobStore = {
    put: async (bytes) => {
      let value: unknown;
      try {
        value = JSON.parse(Buffer.from(bytes).toString("utf8"));
      } catch {
        return blobs.put(bytes); // not JSON: not an output the runtime wrote
      }
      const done = await redactor.apply(value, { runId: "(blob)", type: "blob", field: "output" });
      if (done === undefined) return blobs.put(bytes);
      const info = await blobs.put(Buffer.from(JSON.stringify(done.value)));
      const record: RedactionRecord = { ...done.record, blob: info.ref };
      keepBlobOriginal(record, value);
      records.set(info.ref, record);
      return info;
    },
    get: (ref) => blobs.get(ref),
    has: (ref) => blobs.has(ref),
    close: () => blobs.close(),
  };
  return decodingLike(store, blobs);
}

/** What {@link withRedaction} is told besides the redaction. */
export interface WithRedactionOptions {
  /**
   * Keep the original of each redacted payload, sealed under a key of the run's own (wrapped by
   * `codec`, which must encrypt, and kept in `journal.dataKeys`), so that the run can be resumed:
   * only the resume opens them; every reader sees the redacted form. `forgetRedactedOriginals`
   * deletes the key, and the originals with it. Without it, a redacted run cannot be resumed.
   */
  readonly keepOriginals?: KeepOriginalsOptions;
}

/**
 * A journal whose appends are redacted (opt-in per journal), its blobs too: pass `journal.blobs`
 * as the loop's `claimCheck.blobs` so claim-checked outputs are redacted. Put it OVER the codec
 * (redact, then encode): `withRedaction(withCodec(journal, codec), r)`; the other order throws
 * `RedactionError` (`redactAfterEncode`) at the first encoded append. The archive is not wrapped:
 * it moves frames already redacted. What a run returns, its tool-call log, its stream and every
 * reader show the redacted form, as stored.
 *
 * A redacted run can be resumed (after a crash, a budget stop, an approval or a wait) only with
 * `keepOriginals`: its originals are then kept encrypted under a key of the run's own, and the
 * resume feeds the model what it was fed live. Without them (or once `forgetRedactedOriginals`
 * deleted the key, or for a claim-checked output, whose blob holds the redacted bytes) the resume
 * is refused with `RedactedHistoryError`, before anything is appended.
 *
 * @example
 * const codec = payloadCodec({ compress: "gzip", encrypt: { keys } });
 * const journal = withRedaction(withCodec(openSqliteJournal("./loom.db"), codec), redaction({ paths: ["$..email"] }), {
 *   keepOriginals: { codec },
 * });
 * await loop.run({ runId, journal, input: "hello" });
 */
export function withRedaction<J extends Journal>(journal: J, redactor: Redaction, options?: WithRedactionOptions): J {
  const records: BlobRecords = new Map();
  const keeper = options?.keepOriginals === undefined ? undefined : originalsKeeper(journal, options.keepOriginals);
  const out: J = {
    ...journal,
    ...(journal.blobs === undefined ? {} : { blobs: redactingBlobs(journal.blobs, redactor, records) }),
  };
  const seal: Seal | undefined =
    keeper === undefined ? undefined : (runId, original, redacted) => sealOriginals(out, runId, original, redacted);
  (out as { store: EventStore }).store = redactingStoreWith(journal.store, redactor, records, seal);
  return markRedacting(out, keeper);
}

/** What {@link verifyRedacted} found. */
export interface RedactionVerdict {
  /** True when the original hashes to the recorded digest (and, where it can be told, the redaction reproduces what is stored). */
  readonly ok: boolean;
  readonly field: string;
  /** The digest the entry recorded, and the original's (keyed like the recorded one, when the key was given). */
  readonly recorded: { readonly digest: string | null; readonly bytes?: number };
  readonly original: { readonly digest: string | null; readonly bytes?: number };
  /**
   * Whether the original, with the recorded paths replaced (and `values` when the record counts
   * value matches), is what the entry stores; undefined when that cannot be told (the function
   * changed it, or value matches are recorded and no `values` were passed).
   */
  readonly reproduced: boolean | undefined;
  readonly paths: readonly string[];
  /** Why it failed, in words. */
  readonly reason?: string;
}

/**
 * Checks an original against a stored, redacted entry: the original's `digestOf` must be the one
 * the entry recorded and, when no redaction function changed it, the original with the recorded
 * paths replaced (by `replacement`, default `"[redacted]"`) and the redaction's `values` replaced
 * must be what the entry stores. A claim-checked output's stored value is in its blob: pass it as
 * `stored`. A keyed digest (`hmac-sha256:<keyId>:…`) is checked with `key`, the provider's key of
 * that id; without it the verdict is not ok and says which key it needs.
 *
 * @example
 * const [entry] = (await readJournal(journal, runId)).filter((e) => redactedFields(e.data).length > 0);
 * verifyRedacted(originalOutput, entry).ok; // true
 * verifyRedacted(originalOutput, keyedEntry, { key: await auditKeys.key("k1") }).ok; // a keyed digest
 */
export function verifyRedacted(
  original: unknown,
  entry: { readonly data: unknown },
  options: {
    readonly field?: string;
    readonly replacement?: unknown;
    readonly stored?: unknown;
    /** The redaction's `values` (needed to reproduce a record that counts value matches). */
    readonly values?: readonly RedactionValue[];
    /** The key a keyed digest names (`hmac-sha256:<keyId>:…`): the key provider's key of that id. */
    readonly key?: Uint8Array;
  } = {},
): RedactionVerdict {
  const records = redactedFields(entry.data);
  const record = options.field === undefined ? records[0] : records.find((r) => r.field === options.field);
  const mine = digestOf(original);
  if (record === undefined) {
    return {
      ok: false,
      field: options.field ?? "",
      recorded: { digest: null, bytes: 0 },
      original: mine,
      reproduced: undefined,
      paths: [],
      reason: "the entry records no redaction of that field",
    };
  }
  const recorded =
    record.bytes === undefined ? { digest: record.digest } : { digest: record.digest, bytes: record.bytes };
  let reproduced: boolean | undefined;
  if (!record.fn && (record.values === undefined || options.values !== undefined)) {
    const replacement = options.replacement === undefined ? "[redacted]" : options.replacement;
    let copy = JSON.parse(JSON.stringify(original) ?? "null");
    replaceAt(copy, record.paths.map(concreteKeys), replacement);
    if (options.values !== undefined) {
      const { patterns } = compileValues(options.values);
      copy = redactValues(copy, patterns, typeof replacement === "string" ? replacement : "[redacted]").value;
    }
    const stored =
      options.stored !== undefined ? options.stored : (entry.data as Record<string, unknown>)[record.field];
    reproduced = digestOf(copy).digest === digestOf(stored).digest;
  }
  const keyId = keyedDigestKeyId(record.digest);
  let same: boolean;
  let originalDigest: RedactionVerdict["original"] = mine;
  let mismatch = `the original hashes to ${mine.digest}, not the recorded ${record.digest}`;
  if (keyId === undefined) {
    same = mine.digest !== null && mine.digest === record.digest && mine.bytes === record.bytes;
  } else if (options.key === undefined) {
    same = false;
    originalDigest = { digest: null };
    mismatch = `the recorded digest is keyed with key ${JSON.stringify(keyId)}: pass that key (verifyRedacted(original, entry, { key }))`;
  } else {
    same = matchesKeyedDigest(original, record.digest as string, options.key);
    originalDigest = { digest: same ? record.digest : null };
    mismatch = `the original does not have the recorded keyed digest under the key given (key ${JSON.stringify(keyId)} is needed)`;
  }
  const reason = !same
    ? mismatch
    : reproduced === false
      ? "the original matches the digest, but with the recorded paths (and values) replaced it is not what the entry stores"
      : undefined;
  return {
    ok: same && reproduced !== false,
    field: record.field,
    recorded,
    original: originalDigest,
    reproduced,
    paths: record.paths,
    ...(reason === undefined ? {} : { reason }),
  };
}

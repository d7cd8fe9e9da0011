import { isClaimCheckEnvelope } from "./claimCheck.ts";
import { isCodecEnvelope } from "./codec/codec.ts";
import type { EntryType } from "./types.ts";

/**
 * The schema of each entry's `data`, as checks: one field test per field, no allocation on the
 * happy path. `validate.ts` applies them to entries read from a store and to entries appended.
 */

// Keyed by the union: tsc fails here when the schema gains an entry type. Reasons (settled,
// interrupted) are checked as strings only: their lists grow with the runtime, not the schema.
export const TYPES: Record<EntryType, true> = {
  "run.started": true,
  "decision.recorded": true,
  "frame.started": true,
  "frame.completed": true,
  "call.settled": true,
  "frames.archived": true,
  "run.completed": true,
  "run.interrupted": true,
  "run.failed": true,
  "attempt.failed": true,
  "run.cancelled": true,
};

/** Thrown inside the checks; the caller adds the run and the seq. Cheap: only built on failure. */
export class Bad {
  constructor(
    readonly field: string,
    readonly message: string,
  ) {}
}

export function kind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : typeof v === "undefined" ? "nothing" : `a ${typeof v}`;
}

export type Data = Record<string, unknown>;

function str(d: Data, k: string): void {
  if (typeof d[k] !== "string") throw new Bad(`data.${k}`, `must be a string, found ${kind(d[k])}`);
}

function present(d: Data, k: string): void {
  if (d[k] === undefined) throw new Bad(`data.${k}`, "is missing");
}

function strings(d: Data, k: string): readonly string[] {
  const v = d[k];
  if (!Array.isArray(v)) throw new Bad(`data.${k}`, `must be an array of strings, found ${kind(v)}`);
  for (let i = 0; i < v.length; i++) {
    if (typeof v[i] !== "string") throw new Bad(`data.${k}[${i}]`, `must be a string, found ${kind(v[i])}`);
  }
  return v;
}

function checkArchived(d: Data, seq: number | undefined): void {
  const ids = strings(d, "frameIds");
  str(d, "archiveRef");
  const digests = d.digests;
  if (typeof digests !== "object" || digests === null || Array.isArray(digests)) {
    throw new Bad("data.digests", `must be an object, found ${kind(digests)}`);
  }
  for (const id of ids) {
    const x = (Object.hasOwn(digests, id) ? (digests as Data)[id] : undefined) as Data | undefined;
    const field = `data.digests[${JSON.stringify(id)}]`;
    if (typeof x !== "object" || x === null) throw new Bad(field, `must be an object, found ${kind(x)}`);
    if (x.digest !== null && typeof x.digest !== "string") throw new Bad(`${field}.digest`, "must be a string or null");
    if (typeof x.bytes !== "number") throw new Bad(`${field}.bytes`, `must be a number, found ${kind(x.bytes)}`);
  }
  const seqs = d.seqs;
  if (seqs === undefined) return;
  if (!Array.isArray(seqs)) throw new Bad("data.seqs", `must be an array of seqs, found ${kind(seqs)}`);
  for (let i = 0; i < seqs.length; i++) {
    const s = seqs[i];
    if (!Number.isInteger(s) || s < 1 || (seq !== undefined && s >= seq)) {
      throw new Bad(`data.seqs[${i}]`, `must be the seq of an earlier entry, found ${JSON.stringify(s)}`);
    }
  }
}

function checkDefinition(p: unknown): void {
  if (typeof p !== "object" || p === null || Array.isArray(p)) {
    throw new Bad("data.definition", `must be an object, found ${kind(p)}`);
  }
  const pin = p as Data;
  if (typeof pin.digest !== "string")
    throw new Bad("data.definition.digest", `must be a string, found ${kind(pin.digest)}`);
  if (pin.system !== null && typeof pin.system !== "string") {
    throw new Bad("data.definition.system", `must be a string or null, found ${kind(pin.system)}`);
  }
  const tools = pin.tools;
  if (typeof tools !== "object" || tools === null || Array.isArray(tools)) {
    throw new Bad("data.definition.tools", `must be an object, found ${kind(tools)}`);
  }
  for (const [name, digest] of Object.entries(tools)) {
    if (digest !== null && typeof digest !== "string") {
      throw new Bad(
        `data.definition.tools[${JSON.stringify(name)}]`,
        `must be a string or null, found ${kind(digest)}`,
      );
    }
  }
  const sources = pin.sources;
  if (sources !== undefined && (!Array.isArray(sources) || sources.some((s) => typeof s !== "string"))) {
    throw new Bad("data.definition.sources", `must be an array of strings, found ${kind(sources)}`);
  }
}

function checkForkedFrom(f: unknown): void {
  if (typeof f !== "object" || f === null || Array.isArray(f)) {
    throw new Bad("data.forkedFrom", `must be an object, found ${kind(f)}`);
  }
  const from = f as Data;
  if (typeof from.runId !== "string")
    throw new Bad("data.forkedFrom.runId", `must be a string, found ${kind(from.runId)}`);
  if (!Number.isInteger(from.seq) || (from.seq as number) < 1) {
    throw new Bad("data.forkedFrom.seq", `must be a seq (an integer ≥ 1), found ${kind(from.seq)}`);
  }
  if (from.stepId !== undefined && typeof from.stepId !== "string") {
    throw new Bad("data.forkedFrom.stepId", `must be a string, found ${kind(from.stepId)}`);
  }
  if (from.entries !== undefined && (!Number.isInteger(from.entries) || (from.entries as number) < 1)) {
    throw new Bad(
      "data.forkedFrom.entries",
      `must be a count of entries (an integer ≥ 1), found ${kind(from.entries)}`,
    );
  }
}

function checkContinues(c: unknown): void {
  if (typeof c !== "object" || c === null || Array.isArray(c)) {
    throw new Bad("data.continues", `must be an object, found ${kind(c)}`);
  }
  const ref = c as Data;
  if (typeof ref.runId !== "string")
    throw new Bad("data.continues.runId", `must be a string, found ${kind(ref.runId)}`);
  if (!Number.isInteger(ref.seq) || (ref.seq as number) < 1) {
    throw new Bad("data.continues.seq", `must be a seq (an integer ≥ 1), found ${kind(ref.seq)}`);
  }
  if (typeof ref.digest !== "string" || !/^[0-9a-f]{64}$/.test(ref.digest)) {
    throw new Bad("data.continues.digest", `must be a sha256 hex digest, found ${kind(ref.digest)}`);
  }
  if (!Number.isInteger(ref.messages) || (ref.messages as number) < 0) {
    throw new Bad(
      "data.continues.messages",
      `must be a count of messages (an integer ≥ 0), found ${kind(ref.messages)}`,
    );
  }
}

function checkCause(c: unknown, at = "data.cause"): void {
  if (typeof c !== "object" || c === null || Array.isArray(c)) {
    throw new Bad(at, `must be an object, found ${kind(c)}`);
  }
  const cause = c as Data;
  if (typeof cause.name !== "string") throw new Bad(`${at}.name`, `must be a string, found ${kind(cause.name)}`);
  if (typeof cause.message !== "string") {
    throw new Bad(`${at}.message`, `must be a string, found ${kind(cause.message)}`);
  }
  if (cause.status !== undefined && !Number.isInteger(cause.status)) {
    throw new Bad(`${at}.status`, `must be an integer, found ${kind(cause.status)}`);
  }
  if (cause.retryable !== undefined && typeof cause.retryable !== "boolean") {
    throw new Bad(`${at}.retryable`, `must be a boolean, found ${kind(cause.retryable)}`);
  }
}

/**
 * The payload codec's mark (src/events/codec/codecStore.ts): `data.encoded` lists the fields that hold
 * a codec envelope in place of their value. Returns the list.
 */
function checkEncoded(d: Data): readonly string[] {
  const fields = strings(d, "encoded");
  for (const f of fields) {
    if (!isCodecEnvelope(d[f])) throw new Bad(`data.${f}`, "is marked encoded but holds no codec envelope");
  }
  return fields;
}

/** Checks `data` against the schema of `type` (known to be a valid type). */
export function checkData(type: EntryType, data: unknown, seq: number | undefined): void {
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    throw new Bad("data", `must be an object, found ${kind(data)}`);
  }
  const d = data as Data;
  const encoded = d.encoded === undefined ? undefined : checkEncoded(d);
  switch (type) {
    case "run.started": {
      str(d, "loopId");
      const input = d.input;
      if (!encoded?.includes("input") && typeof input !== "string" && !Array.isArray(input)) {
        throw new Bad("data.input", `must be a string or an array of messages, found ${kind(input)}`);
      }
      strings(d, "tools");
      if (d.definition !== undefined) checkDefinition(d.definition);
      if (d.forkedFrom !== undefined) checkForkedFrom(d.forkedFrom);
      if (d.continues !== undefined) checkContinues(d.continues);
      return;
    }
    case "decision.recorded":
      str(d, "decisionId");
      str(d, "source");
      present(d, "choice");
      return;
    case "frame.started":
      str(d, "frameId");
      str(d, "effect");
      str(d, "inputDigest");
      return;
    case "frame.completed":
      // `output` may be absent: a tool that returned undefined has no JSON output.
      str(d, "frameId");
      if (d.failed !== undefined && d.failed !== true) throw new Bad("data.failed", "must be true when present");
      if (d.failed === true && d.output !== undefined) throw new Bad("data.output", "a failed frame has no output");
      if (d.digest !== undefined) {
        if (d.digest !== null && typeof d.digest !== "string") throw new Bad("data.digest", "must be a string or null");
        if (!Number.isInteger(d.bytes)) throw new Bad("data.bytes", `must be an integer, found ${kind(d.bytes)}`);
      }
      if (d.claimChecked !== undefined && (d.claimChecked !== true || !isClaimCheckEnvelope(d.output))) {
        throw new Bad("data.claimChecked", "must be true, and only beside a claim-check envelope");
      }
      return;
    case "call.settled":
      str(d, "stepId");
      if (d.status !== "ok" && d.status !== "error") throw new Bad("data.status", 'must be "ok" or "error"');
      str(d, "reason");
      return;
    case "frames.archived":
      checkArchived(d, seq);
      return;
    case "run.completed": {
      if (encoded?.includes("output")) return;
      const o = d.output as Data | undefined;
      if (typeof o !== "object" || o === null) throw new Bad("data.output", `must be an object, found ${kind(o)}`);
      if (typeof o.content !== "string") {
        throw new Bad("data.output.content", `must be a string, found ${kind(o.content)}`);
      }
      if (!Number.isInteger(o.iterations)) {
        throw new Bad("data.output.iterations", `must be an integer, found ${kind(o.iterations)}`);
      }
      return;
    }
    case "run.interrupted":
      str(d, "reason");
      if (d.cause !== undefined && !encoded?.includes("cause")) checkCause(d.cause);
      return;
    case "run.failed": {
      if (encoded?.includes("error")) return;
      const e = d.error as Data | undefined;
      if (typeof e !== "object" || e === null) throw new Bad("data.error", `must be an object, found ${kind(e)}`);
      if (typeof e.name !== "string") throw new Bad("data.error.name", "must be a string");
      if (typeof e.message !== "string") throw new Bad("data.error.message", "must be a string");
      if (e.code !== undefined && typeof e.code !== "string") throw new Bad("data.error.code", "must be a string");
      return;
    }
    case "run.cancelled":
      str(d, "reason");
      return;
    case "attempt.failed": {
      str(d, "frameId");
      if (!Number.isInteger(d.attempt) || (d.attempt as number) < 1) {
        throw new Bad("data.attempt", `must be an integer ≥ 1, found ${kind(d.attempt)}`);
      }
      if (!encoded?.includes("error")) {
        checkCause(d.error, "data.error");
        const e = d.error as Data;
        if (typeof e.retryable !== "boolean") throw new Bad("data.error.retryable", "must be a boolean");
        if (e.retryAfterMs !== undefined && !(Number.isFinite(e.retryAfterMs) && (e.retryAfterMs as number) >= 0)) {
          throw new Bad("data.error.retryAfterMs", `must be a number ≥ 0, found ${kind(e.retryAfterMs)}`);
        }
      }
      if (d.retryAt !== null && !Number.isFinite(d.retryAt)) {
        throw new Bad("data.retryAt", `must be a time in ms or null, found ${kind(d.retryAt)}`);
      }
      return;
    }
    default: {
      const never: never = type;
      throw new Bad("type", `unknown entry type ${JSON.stringify(never)}`);
    }
  }
}

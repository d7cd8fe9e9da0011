/**
 * Where a Loom journal's bytes go, per kind of entry and per column, read back from the SQLite
 * file of a completed run (bench/vs-langgraph.ts prints it per turn and against the floor).
 */
import Database from "better-sqlite3";
import { tablePayload } from "./storage.ts";

export type ByteParts = Record<string, number>;

/** Cross-cutting costs inside the parts above (already counted there). */
export interface OfWhich {
  /** Every sha256 digest as stored: 32 B in a digest column, 64 B as hex in text (prompt and input digests, lean log digests). */
  readonly digests: number;
  /** Every frame or step id string, in the frame column or in text (`agent#turn:12:tool:0`, …). */
  readonly ids: number;
}

/**
 * Splits the `rows` figure of a Loom journal into its parts. The parts add up to the record
 * payload of `loom_entries` plus the small tables beside it (so to `rows` of `measureSqlite`).
 */
export function loomByteParts(path: string): { parts: ByteParts; ofWhich: OfWhich } {
  const db = new Database(path, { readonly: true });
  try {
    const parts: ByteParts = {
      "tool outputs (the JSON the tool frames record)": 0,
      "tool frame.completed around the output": 0,
      "tool frame.started (frameId, effect, inputDigest)": 0,
      "model frame.started (frameId, effect, prompt digest)": 0,
      "model frame.completed (the response: one tool call)": 0,
      "run.completed (the returned value)": 0,
      "run.started + mode pin (once a run)": 0,
      "meta columns (v, at: integers)": 0,
      "run + type columns (integers)": 0,
      "SQLite record header + seq": 0,
      "loom_runs, loom_entry_types, loom_meta": 0,
    };
    const add = (part: string, n: number) => {
      parts[part] = (parts[part] ?? 0) + n;
    };
    // The stored bytes of each column (SQLite's own length of the value: text in UTF-8, a blob's
    // bytes, 0 for NULL; integers by the size SQLite gives them), and the entry's text to class it.
    const rows = db
      .prepare(
        `SELECT j.type, j.data, e.frame, e.digest, e.data AS rest,
                coalesce(length(CAST(e.frame AS BLOB)), 0) + coalesce(length(CAST(e.effect AS BLOB)), 0)
                  + coalesce(length(e.digest), 0) + coalesce(length(CAST(e.data AS BLOB)), 0) AS stored,
                e.run, e.type AS code, e.at, e.v
           FROM loom_entries e JOIN loom_journal j ON j.run_id = (SELECT run_id FROM loom_runs WHERE run = e.run) AND j.seq = e.seq
          ORDER BY e.run, e.seq`,
      )
      .raw()
      .all() as [string, string, string | null, Buffer | null, string | null, number, number, number, number, number][];
    let columns = 0;
    let digests = 0;
    let ids = 0;
    for (const [type, data, frame, digest, rest, stored, run, code, at, v] of rows) {
      // Digests and ids as they are stored: a digest column holds 32 bytes, a hex digest in text 64.
      digests += (digest ? 32 : 0) + 64 * (rest?.match(/"[0-9a-f]{64}"/g)?.length ?? 0);
      ids += frame ? Buffer.byteLength(frame, "utf8") : 0;
      for (const id of rest?.match(/"[^"]*#turn:[^"]*"/g) ?? []) ids += Buffer.byteLength(id, "utf8") - 2;
      const frameId = type.startsWith("frame.") ? String((JSON.parse(data) as { frameId: unknown }).frameId) : "";
      const kind = frameId.endsWith(":model") ? "model" : "tool";
      if (type === "frame.completed" && kind === "tool") {
        const output = Buffer.byteLength(JSON.stringify((JSON.parse(data) as { output: unknown }).output), "utf8");
        add("tool outputs (the JSON the tool frames record)", output);
        add("tool frame.completed around the output", stored - output);
      } else if (type === "frame.completed") add("model frame.completed (the response: one tool call)", stored);
      else if (type === "frame.started" && kind === "tool")
        add("tool frame.started (frameId, effect, inputDigest)", stored);
      else if (type === "frame.started") add("model frame.started (frameId, effect, prompt digest)", stored);
      else if (type === "run.completed") add("run.completed (the returned value)", stored);
      else add("run.started + mode pin (once a run)", stored);
      const meta = intBytes(at) + intBytes(v);
      const keys = intBytes(run) + intBytes(code);
      add("meta columns (v, at: integers)", meta);
      add("run + type columns (integers)", keys);
      columns += stored + meta + keys;
    }
    add("SQLite record header + seq", tablePayload(db, "loom_entries") - columns);
    for (const table of ["loom_runs", "loom_entry_types", "loom_meta"])
      add("loom_runs, loom_entry_types, loom_meta", tablePayload(db, table));
    return { parts, ofWhich: { digests, ids } };
  } finally {
    db.close();
  }
}

/** The bytes SQLite stores an integer in (0 and 1 take none: the record header says which). */
function intBytes(n: number): number {
  if (n === 0 || n === 1) return 0;
  const a = n < 0 ? -n - 1 : n;
  if (a < 2 ** 7) return 1;
  if (a < 2 ** 15) return 2;
  if (a < 2 ** 23) return 3;
  if (a < 2 ** 31) return 4;
  if (a < 2 ** 47) return 6;
  return 8;
}

/**
 * Where a Loom journal's bytes go, per kind of entry and per column, read back from the SQLite
 * file of a completed run (bench/vs-langgraph.ts prints it per turn and against the floor).
 */
import Database from "better-sqlite3";
import { tablePayload } from "./storage.ts";

export type ByteParts = Record<string, number>;

/** Cross-cutting costs inside the parts above (already counted there). */
export interface OfWhich {
  /** Every sha256 hex digest in the data column (64 B each): prompt and input digests, lean log digests. */
  readonly digests: number;
  /** Every frame or step id string in the data column (`agent#turn:12:tool:0`, …). */
  readonly ids: number;
}

/**
 * Splits the `rows` figure of a Loom journal into its parts. The parts add up to the record
 * payload of `loom_entries` plus `loom_meta`'s one row (so to `rows` of `measureSqlite`).
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
      "run.completed (the returned log)": 0,
      "run.started + mode pin (once a run)": 0,
      "meta column ({v, at} on every entry)": 0,
      "run_id + type columns": 0,
      "SQLite record header + seq": 0,
      "loom_meta (schema version)": 0,
    };
    const add = (part: string, n: number) => {
      parts[part] = (parts[part] ?? 0) + n;
    };
    const rows = db.prepare("SELECT run_id, type, data, meta FROM loom_entries ORDER BY run_id, seq").raw().all() as [
      string,
      string,
      string,
      string,
    ][];
    let columns = 0;
    let digests = 0;
    let ids = 0;
    for (const [runId, type, data, meta] of rows) {
      digests += 64 * (data.match(/"[0-9a-f]{64}"/g)?.length ?? 0);
      for (const id of data.match(/"[^"]*#turn:[^"]*"/g) ?? []) ids += Buffer.byteLength(id, "utf8") - 2;
      const dataBytes = Buffer.byteLength(data, "utf8");
      const frameId = type.startsWith("frame.") ? String((JSON.parse(data) as { frameId: unknown }).frameId) : "";
      const kind = frameId.endsWith(":model") ? "model" : "tool";
      if (type === "frame.completed" && kind === "tool") {
        const output = Buffer.byteLength(JSON.stringify((JSON.parse(data) as { output: unknown }).output), "utf8");
        add("tool outputs (the JSON the tool frames record)", output);
        add("tool frame.completed around the output", dataBytes - output);
      } else if (type === "frame.completed") add("model frame.completed (the response: one tool call)", dataBytes);
      else if (type === "frame.started" && kind === "tool")
        add("tool frame.started (frameId, effect, inputDigest)", dataBytes);
      else if (type === "frame.started") add("model frame.started (frameId, effect, prompt digest)", dataBytes);
      else if (type === "run.completed") add("run.completed (the returned log)", dataBytes);
      else add("run.started + mode pin (once a run)", dataBytes);
      const metaBytes = Buffer.byteLength(meta, "utf8");
      const idBytes = Buffer.byteLength(runId, "utf8") + Buffer.byteLength(type, "utf8");
      add("meta column ({v, at} on every entry)", metaBytes);
      add("run_id + type columns", idBytes);
      columns += dataBytes + metaBytes + idBytes;
    }
    add("SQLite record header + seq", tablePayload(db, "loom_entries") - columns);
    add("loom_meta (schema version)", tablePayload(db, "loom_meta"));
    return { parts, ofWhich: { digests, ids } };
  } finally {
    db.close();
  }
}

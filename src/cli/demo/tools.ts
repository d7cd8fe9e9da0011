import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import type { Journal, Tool } from "../../index.ts";
import { parseFrameId } from "../../journal.ts";

/**
 * The demo's tools: small real work on the package's own files and on the journal the run is
 * writing. Each output is shaped to the `maxBytes` the model asks for (the demo asks for
 * 1.6–3.9 kB), so the run has the workload the lean log was designed on: outputs of 1.5–4 kB.
 */

export interface DemoToolContext {
  /** The package root: the files the tools read. */
  readonly root: string;
  /** The journal the run writes, which `query_journal` reads. */
  readonly journal: Journal;
  readonly runId: string;
}

/** The package's text files (sources in a clone, dist/ where it is installed), relative to the root, sorted. */
export function packageFiles(root: string): string[] {
  const out: string[] = [];
  // In a clone, dist/ is build output beside the sources; where the package is installed it is all there is.
  const skip = ["node_modules", "coverage", ...(existsSync(join(root, "src")) ? ["dist"] : [])];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name.startsWith(".") || skip.includes(entry.name)) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.(ts|js|json|md)$/.test(entry.name) && entry.name !== "package-lock.json")
        out.push(relative(root, path));
    }
  };
  walk(root);
  return out.sort();
}

const sha256 = (text: string | Buffer) => createHash("sha256").update(text).digest("hex");
const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

/** `base` with `rows` appended to `base[key]` while its JSON stays within `maxBytes`. */
function fitRows<T>(base: Record<string, unknown>, key: string, rows: readonly T[], maxBytes: number) {
  const kept: T[] = [];
  let size = jsonBytes({ ...base, [key]: [] });
  for (const row of rows) {
    const add = jsonBytes(row) + (kept.length > 0 ? 1 : 0);
    if (size + add > maxBytes) break;
    kept.push(row);
    size += add;
  }
  return { ...base, [key]: kept, shown: kept.length, of: rows.length };
}

/** `base` with as much of `text` in `base[key]` as fits within `maxBytes` of JSON. */
function fitText(base: Record<string, unknown>, key: string, text: string, maxBytes: number) {
  let end = Math.max(0, maxBytes - jsonBytes({ ...base, [key]: "" }));
  while (end > 0 && jsonBytes({ ...base, [key]: text.slice(0, end) }) > maxBytes) end -= Math.ceil(end / 20);
  return { ...base, [key]: text.slice(0, end) };
}

const inputOf = <T>(input: unknown) => input as T;

/** The four tools the demo's model calls. */
export function demoTools(context: DemoToolContext): Record<string, Tool> {
  const { root, journal, runId } = context;
  const read = (path: string) => readFileSync(join(root, path), "utf8");
  return {
    read_file: {
      description: "Reads a file of the package: its size, line count, sha256 and its first lines.",
      inputSchema: { type: "object", properties: { path: { type: "string" }, maxBytes: { type: "number" } } },
      execute(input) {
        const { path, maxBytes } = inputOf<{ path: string; maxBytes: number }>(input);
        const text = read(path);
        const base = { path, bytes: Buffer.byteLength(text), lines: text.split("\n").length, sha256: sha256(text) };
        return fitText(base, "head", text, maxBytes);
      },
    },
    word_stats: {
      description: "Counts the words of a file of the package and lists the most frequent ones.",
      inputSchema: { type: "object", properties: { path: { type: "string" }, maxBytes: { type: "number" } } },
      execute(input) {
        const { path, maxBytes } = inputOf<{ path: string; maxBytes: number }>(input);
        const lines = read(path).split("\n");
        const counts = new Map<string, { count: number; firstLine: number }>();
        lines.forEach((line, i) => {
          for (const word of line.toLowerCase().match(/[a-z_][a-z0-9_]{2,}/g) ?? []) {
            const seen = counts.get(word);
            if (seen) seen.count++;
            else counts.set(word, { count: 1, firstLine: i + 1 });
          }
        });
        const top = [...counts]
          .sort((a, b) => b[1].count - a[1].count || a[0].localeCompare(b[0]))
          .map(([word, { count, firstLine }]) => ({ word, count, firstLine }));
        const words = top.reduce((sum, w) => sum + w.count, 0);
        return fitRows({ path, lines: lines.length, words, distinct: top.length }, "top", top, maxBytes);
      },
    },
    checksum_tree: {
      description: "Hashes every file under a folder of the package (size, lines, sha256 prefix).",
      inputSchema: { type: "object", properties: { dir: { type: "string" }, maxBytes: { type: "number" } } },
      execute(input) {
        const { dir, maxBytes } = inputOf<{ dir: string; maxBytes: number }>(input);
        const files = packageFiles(root).filter((f) => dir === "." || f.startsWith(`${dir}/`));
        const rows = files.map((path) => {
          const bytes = readFileSync(join(root, path));
          return {
            path,
            bytes: bytes.length,
            lines: bytes.toString("utf8").split("\n").length,
            sha256: sha256(bytes).slice(0, 16),
          };
        });
        const total = rows.reduce((sum, r) => sum + r.bytes, 0);
        const newest = Math.max(0, ...files.map((f) => statSync(join(root, f)).mtimeMs));
        return fitRows(
          { dir, files: rows.length, totalBytes: total, newest: new Date(newest).toISOString() },
          "rows",
          rows,
          maxBytes,
        );
      },
    },
    query_journal: {
      description:
        "Reads this run's journal so far: entries by type, bytes, and the latest entries with their digests.",
      inputSchema: { type: "object", properties: { maxBytes: { type: "number" } } },
      async execute(input) {
        const { maxBytes } = inputOf<{ maxBytes: number }>(input);
        const entries = await journal.store.read(runId);
        const byType: Record<string, number> = {};
        let bytes = 0;
        for (const e of entries) {
          byType[e.type] = (byType[e.type] ?? 0) + 1;
          bytes += jsonBytes(e.data);
        }
        const latest = entries
          .slice()
          .reverse()
          .map((e) => {
            const id = "frameId" in e.data ? e.data.frameId : "decisionId" in e.data ? e.data.decisionId : undefined;
            const kind = id === undefined ? undefined : parseFrameId(id)?.kind;
            return {
              seq: e.seq,
              type: e.type,
              id,
              kind,
              dataBytes: jsonBytes(e.data),
              sha256: sha256(JSON.stringify(e.data)).slice(0, 16),
            };
          });
        return fitRows({ runId, entries: entries.length, dataBytes: bytes, byType }, "latest", latest, maxBytes);
      },
    },
  };
}

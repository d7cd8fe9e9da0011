/**
 * What the journal stores, with and without the payload codec (issue 33): runs of 200 and 2,000
 * turns whose tools return what agents' tools do (HTML pages, search-result JSON, file listings,
 * source code, all made here from a seeded generator), appended to a SQLite journal one turn per
 * append, as the loop does. Per codec: the payload bytes as stored (entry data) beside the raw
 * JSON bytes of the same entries, the file's size, and the time to append and to read back
 * (readJournal: decode + validate). Ends with a `RESULT {json}` line.
 *
 *   node --import tsx bench/storage.ts [turns…]   (200 and 2000 by default)
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type PayloadCodecOptions, payloadCodec, staticKeys } from "../src/events/codec/codec.ts";
import { withCodec } from "../src/events/codec/codecStore.ts";
import { openSqliteJournal, readJournal } from "../src/events/journal.ts";
import type { NewEntry } from "../src/events/types.ts";
import { printTable, rng } from "./support.ts";

const next = rng(33);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T;
const WORDS =
  "the of and to in agent ledger invoice customer refund order account balance report search result page query model tool call step frame journal retry policy lease owner worker queue approval budget token stream".split(
    " ",
  );
const words = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(" ");

/** A fetched web page: markup around paragraphs, links and a table. */
function htmlPage(): string {
  const parts = ["<!doctype html><html><head><title>", words(5), '</title><meta charset="utf-8"></head><body>'];
  for (let s = 0; s < 6 + Math.floor(next() * 10); s++) {
    parts.push(`<section id="s${s}"><h2>${words(4)}</h2>`);
    for (let p = 0; p < 3; p++) parts.push(`<p>${words(30 + Math.floor(next() * 40))}</p>`);
    parts.push(`<a href="https://example.com/${pick(WORDS)}/${Math.floor(next() * 1e6)}">${words(3)}</a>`);
    parts.push("<table>");
    for (let r = 0; r < 4; r++) parts.push(`<tr><td>${words(2)}</td><td>${(next() * 1e4).toFixed(2)}</td></tr>`);
    parts.push("</table></section>");
  }
  parts.push("</body></html>");
  return parts.join("");
}

/** A search API's answer: hits with urls, titles, snippets and scores. */
function searchResults(): unknown {
  return {
    query: words(3),
    total: Math.floor(next() * 1e5),
    hits: Array.from({ length: 10 }, (_, i) => ({
      rank: i + 1,
      url: `https://${pick(WORDS)}.example.org/${pick(WORDS)}/${Math.floor(next() * 1e8).toString(36)}`,
      title: words(6),
      snippet: words(35),
      score: Math.round(next() * 1e6) / 1e6,
      published: new Date(1.6e12 + next() * 1e11).toISOString(),
    })),
  };
}

/** A directory listing: paths, sizes, modes and times. */
function fileListing(): unknown {
  const root = `/srv/${pick(WORDS)}`;
  return {
    root,
    entries: Array.from({ length: 40 + Math.floor(next() * 80) }, () => ({
      path: `${root}/${pick(WORDS)}/${pick(WORDS)}-${Math.floor(next() * 1e4)}.${pick(["ts", "json", "md", "log", "csv"])}`,
      size: Math.floor(next() * 1e6),
      mode: pick(["-rw-r--r--", "-rwxr-xr-x", "drwxr-xr-x"]),
      modified: new Date(1.6e12 + next() * 1e11).toISOString(),
    })),
  };
}

/** A source file as a read-file tool returns it. */
function sourceCode(): unknown {
  const lines: string[] = [`import { ${pick(WORDS)} } from "./${pick(WORDS)}.ts";`, ""];
  for (let f = 0; f < 4 + Math.floor(next() * 8); f++) {
    const name = `${pick(WORDS)}${f}`;
    lines.push(`/** ${words(12)} */`, `export function ${name}(input: string, limit = ${f * 10}): number {`);
    for (let l = 0; l < 6 + Math.floor(next() * 10); l++) {
      lines.push(
        `  const ${pick(WORDS)}${l} = input.indexOf("${pick(WORDS)}") + ${Math.floor(next() * 100)}; // ${words(5)}`,
      );
    }
    lines.push(`  return Math.min(limit, input.length);`, "}", "");
  }
  return { path: `src/${pick(WORDS)}.ts`, text: lines.join("\n") };
}

const TOOLS = [
  ["fetch", htmlPage],
  ["search", searchResults],
  ["list_files", fileListing],
  ["read_file", sourceCode],
] as const;

/** Turn i: the model asks for two tools, then each runs. */
function turnEntries(i: number): NewEntry[] {
  const calls = [pick(TOOLS), pick(TOOLS)];
  const model = `bench#turn:${i}:model`;
  const out: NewEntry[] = [
    { type: "frame.started", data: { frameId: model, effect: "model", inputDigest: "0".repeat(64) } },
    {
      type: "frame.completed",
      data: {
        frameId: model,
        output: {
          text: words(20),
          toolCalls: calls.map(([name], j) => ({ id: `c${i}.${j}`, name, input: { q: words(4) } })),
        },
      },
    },
  ];
  calls.forEach(([name, make], j) => {
    const id = `bench#turn:${i}:tool:${j}`;
    out.push({ type: "frame.started", data: { frameId: id, effect: `tool:${name}`, inputDigest: "0".repeat(64) } });
    out.push({ type: "frame.completed", data: { frameId: id, output: make() } });
  });
  return out;
}

const keys = staticKeys({ current: "k1", keys: { k1: randomBytes(32) } });
const CODECS: ReadonlyArray<readonly [string, PayloadCodecOptions | undefined]> = [
  ["none", undefined],
  ["gzip", { compress: "gzip" }],
  ["brotli", { compress: "brotli" }],
  ["aes-256-gcm", { encrypt: { keys } }],
  ["gzip + aes-256-gcm", { compress: "gzip", encrypt: { keys } }],
  ["brotli + aes-256-gcm", { compress: "brotli", encrypt: { keys } }],
];

const dir = mkdtempSync(join(tmpdir(), "loom-bench-storage-"));
const results: Record<string, unknown>[] = [];
try {
  const counts = process.argv.slice(2).map(Number);
  for (const turns of counts.length > 0 ? counts : [200, 2000]) {
    const run = Array.from({ length: turns }, (_, i) => turnEntries(i));
    const raw = run.flat().reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e.data)), 0);
    const rows: Record<string, string | number>[] = [];
    for (const [label, options] of CODECS) {
      const path = join(dir, `${turns}-${label.replace(/\W+/g, "_")}.db`);
      const plain = openSqliteJournal(path);
      const journal = options === undefined ? plain : withCodec(plain, payloadCodec(options));
      const t0 = performance.now();
      let version = 0;
      for (const entries of run)
        version = (await journal.store.append("r", entries, { expectedVersion: version })).version;
      const appendMs = performance.now() - t0;
      const t1 = performance.now();
      const read = await readJournal(journal, "r");
      const readMs = performance.now() - t1;
      if (read.length !== version) throw new Error(`read ${read.length} of ${version} entries`);
      const stored = (await plain.store.read("r")).reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e.data)), 0);
      await plain.close();
      const fileBytes = statSync(path).size + (statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0);
      const row = { turns, codec: label, rawBytes: raw, storedBytes: stored, fileBytes, appendMs, readMs };
      results.push(row);
      rows.push({
        codec: label,
        "raw JSON (MB)": (raw / 1e6).toFixed(2),
        "stored (MB)": (stored / 1e6).toFixed(2),
        "stored / raw": (stored / raw).toFixed(3),
        "file (MB)": (fileBytes / 1e6).toFixed(2),
        "append (ms/turn)": (appendMs / turns).toFixed(3),
        "read (ms)": readMs.toFixed(0),
      });
    }
    printTable(`storage: ${turns} turns (2 tool calls a turn: HTML, search JSON, file listings, code)`, rows);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`RESULT ${JSON.stringify({ bench: "storage", results })}`);

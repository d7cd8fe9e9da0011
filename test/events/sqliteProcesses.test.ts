import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createJournal, readJournal } from "../../src/events/journal.ts";
import { sqliteStore } from "../../src/events/sqlite/sqlite.ts";
import type { EntryOf } from "../../src/events/types.ts";
import { tempDir } from "./tmp.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));
const worker = (name: string) => fileURLToPath(new URL(`./workers/${name}`, import.meta.url));

/** Starts `node --import tsx <worker>` in the repo root and collects its stdout lines. */
function start(name: string, args: string[]): { child: ChildProcess; lines: string[]; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ["--import", "tsx", worker(name), ...args], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  let rest = "";
  let errors = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    const parts = (rest + chunk.toString()).split("\n");
    rest = parts.pop()!;
    lines.push(...parts);
  });
  child.stderr!.on("data", (chunk: Buffer) => {
    errors += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) =>
    child.on("close", (code) => {
      if (code !== 0 && code !== null) console.error(errors);
      resolve(code);
    }),
  );
  return { child, lines, exited };
}

async function until(condition: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("sqliteStore across processes", () => {
  let tmp: ReturnType<typeof tempDir>;
  beforeEach(() => {
    tmp = tempDir();
  });
  afterEach(() => tmp.remove());

  it("keeps a whole prefix of the appends when the writer is killed with SIGKILL mid-stream", async () => {
    const path = tmp.file("killed.db");
    const run = start("appendStream.ts", [path, "r"]);
    await until(() => run.lines.length >= 150, "150 acknowledged appends");
    run.child.kill("SIGKILL");
    await run.exited;
    const acknowledged = run.lines.length;

    const store = sqliteStore(path);
    const entries = (await readJournal(createJournal({ store }), "r")) as EntryOf<"decision.recorded">[];
    await store.close();
    // Every append that returned is there, each batch whole, nothing after a missing one.
    const batches = new Map<number, number>();
    entries.forEach((e, i) => {
      expect(e.seq).toBe(i + 1);
      const { batch, index, size } = e.data.choice as { batch: number; index: number; size: number };
      expect(index).toBe(batches.get(batch) ?? 0);
      batches.set(batch, index + 1);
      expect(size).toBe((batch % 5) + 1);
    });
    const stored = [...batches.keys()];
    expect(stored).toEqual(stored.map((_, i) => i));
    for (const [batch, count] of batches) expect(count, `batch ${batch}`).toBe((batch % 5) + 1);
    expect(stored.length).toBeGreaterThanOrEqual(acknowledged);
    expect(stored.length).toBeLessThanOrEqual(acknowledged + 1);
  });

  it("serializes two processes appending to one run: no entry lost or doubled, conflicts detected", async () => {
    const path = tmp.file("race.db");
    const go = tmp.file("go");
    const count = 150;
    const writers = ["a", "b"].map((name) => start("appendRace.ts", [path, "r", name, String(count), go]));
    await until(() => writers.every((w) => w.lines.includes("ready")), "both writers ready");
    writeFileSync(go, "");
    expect(await Promise.all(writers.map((w) => w.exited))).toEqual([0, 0]);
    const results = writers.map((w) => JSON.parse(w.lines.at(-1)!) as { appended: number; conflicts: number });
    expect(results.map((r) => r.appended)).toEqual([count, count]);
    // Both read version 0 before the go signal and appended with it: one of them had to lose.
    expect(results[0]!.conflicts + results[1]!.conflicts).toBeGreaterThanOrEqual(1);

    const store = sqliteStore(path);
    const entries = (await readJournal(createJournal({ store }), "r")) as EntryOf<"decision.recorded">[];
    await store.close();
    expect(entries.map((e) => e.seq)).toEqual(Array.from({ length: 2 * count }, (_, i) => i + 1));
    for (const name of ["a", "b"]) {
      const mine = entries.filter((e) => e.data.source === name).map((e) => e.data.choice);
      expect(mine).toEqual(Array.from({ length: count }, (_, i) => i));
    }
  });
});

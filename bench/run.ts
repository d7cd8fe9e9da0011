/**
 * Runs every benchmark of this folder in turn, each in its own process (`node --import tsx
 * bench/<name>.ts`), so one's heap and JIT never colour another's figures; their tables print as
 * they go. Names on the command line run only those. A benchmark fails if it exits with an error
 * or ends without its `RESULT {json}` line (support.ts's `printResult`).
 *
 *   npm run bench
 *   node --import tsx bench/run.ts digest loop
 */
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { NOT_BENCHMARKS } from "./support.ts";

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);
const only = process.argv.slice(2).map((name) => basename(name, ".ts"));

const all = readdirSync(here, { withFileTypes: true })
  .filter((e) => e.isFile() && e.name.endsWith(".ts") && !NOT_BENCHMARKS.has(e.name))
  .map((e) => e.name)
  .sort();
const unknown = only.filter((name) => !all.includes(`${name}.ts`));
if (unknown.length > 0) {
  console.error(
    `bench/run.ts: no benchmark ${unknown.join(", ")}; there are ${all.map((f) => basename(f, ".ts")).join(", ")}`,
  );
  process.exit(2);
}

const failed: string[] = [];
for (const file of all.filter((f) => only.length === 0 || only.includes(basename(f, ".ts")))) {
  console.log(`\n## bench/${file}  (node --import tsx bench/${file})`);
  const started = performance.now();
  const result = await runBench(file);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (result.code === 0 && result.resulted) console.log(`\n(bench/${file}: ${seconds} s)`);
  else {
    failed.push(file);
    const why = result.code !== 0 ? (result.signal ?? `exit code ${result.code}`) : "no RESULT line";
    console.log(`\nbench/${file} FAILED (${why}) after ${seconds} s`);
  }
}
if (failed.length > 0) {
  console.error(`\n${failed.length} benchmark(s) failed: ${failed.join(", ")}`);
  process.exitCode = 1;
}

/** Runs one benchmark, its output passed through as it comes; whether a line began `RESULT {`. */
function runBench(file: string): Promise<{ code: number | null; signal: string | null; resulted: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(here, file)], {
      cwd: root,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let resulted = false;
    let tail = "";
    child.stdout.on("data", (chunk: Buffer) => {
      process.stdout.write(chunk);
      const text = tail + chunk.toString("utf8");
      if (/(^|\n)RESULT \{/.test(text)) resulted = true;
      tail = text.slice(-16);
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, resulted }));
  });
}

/**
 * Runs every benchmark of this folder in turn, each in its own process (`node --import tsx
 * bench/<name>.ts`), so one's heap and JIT never colour another's figures; their tables print as
 * they go. Names on the command line run only those.
 *
 *   npm run bench
 *   node --import tsx bench/run.ts digest loop
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);
const NOT_BENCHMARKS = new Set(["support.ts", "run.ts"]);
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
  const result = spawnSync(process.execPath, ["--import", "tsx", join(here, file)], { cwd: root, stdio: "inherit" });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  if (result.status === 0) console.log(`\n(bench/${file}: ${seconds} s)`);
  else {
    failed.push(file);
    console.log(`\nbench/${file} FAILED (${result.signal ?? `exit code ${result.status}`}) after ${seconds} s`);
  }
}
if (failed.length > 0) {
  console.error(`\n${failed.length} benchmark(s) failed: ${failed.join(", ")}`);
  process.exitCode = 1;
}

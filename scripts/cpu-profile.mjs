/**
 * Summarizes a V8 CPU profile (`node --cpu-prof`, or a bench's `PROF=file`) by self time: the
 * functions, then the files (a package, a source file, a native part such as the collector) that
 * took the most, with their share of the samples that were not idle. `--per N` divides the times
 * by N (the turns or the runs profiled) to print µs per turn or per run.
 *
 *   node --cpu-prof --cpu-prof-dir=prof --import tsx bench/loop.ts
 *   node scripts/cpu-profile.mjs prof/CPU.….cpuprofile --top 40 --per 8000
 *
 * A process run with tsx writes two profiles (the loader's thread too): take the larger.
 */
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at === -1 ? fallback : Number(args[at + 1]);
};
const file = args.find((a, i) => !a.startsWith("--") && !args[i - 1]?.startsWith("--"));
if (file === undefined) {
  console.error("usage: node scripts/cpu-profile.mjs <file.cpuprofile> [--top 40] [--per N]");
  process.exit(2);
}
const top = option("--top", 40);
const per = option("--per", 0);

const profile = JSON.parse(readFileSync(file, "utf8"));
const took = new Map(); // node id -> µs sampled in it
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  took.set(id, (took.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}

/** Where a frame's code lives: a package, a source file under src/, or the frame's own name (native). */
const place = (frame) => frame.url.replace(/^.*\/(node_modules|src)\//, "$1/") || frame.functionName || "(native)";
const byFunction = new Map();
const byPlace = new Map();
let busy = 0;
let idle = 0;
for (const node of profile.nodes) {
  const us = took.get(node.id) ?? 0;
  const frame = node.callFrame;
  if (frame.functionName === "(idle)") {
    idle += us;
    continue;
  }
  busy += us;
  const name = `${frame.functionName || "(anonymous)"} ${place(frame)}:${frame.lineNumber + 1}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + us);
  // A package counts as one place (xstate's code is split over several files).
  const where = place(frame).replace(/^node_modules\/((?:@[^/]+\/)?[^/]+)\/.*$/, "$1 (package)");
  byPlace.set(where, (byPlace.get(where) ?? 0) + us);
}

const amount = (us) => (per > 0 ? `${(us / per).toFixed(2)} µs` : `${(us / 1000).toFixed(1)} ms`);
const print = (title, rows) => {
  console.log(`\n${title}\n`);
  for (const [name, us] of [...rows].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${amount(us).padStart(12)} ${((100 * us) / busy).toFixed(1).padStart(5)}%  ${name}`);
  }
};
console.log(
  `${file}: ${(busy / 1000).toFixed(0)} ms busy, ${(idle / 1000).toFixed(0)} ms idle${per > 0 ? `; times per unit of ${per}` : ""}`,
);
print("Self time by function", byFunction);
print("Self time by file or package", byPlace);
const sum = (test) => [...byPlace].filter(([name]) => test(name)).reduce((n, [, us]) => n + us, 0);
const own = sum((name) => name.startsWith("src/"));
const packages = sum((name) => name.endsWith("(package)"));
const collector = sum((name) => name === "(garbage collector)");
print(
  "Self time by kind",
  new Map([
    ["Loom's own code (src/)", own],
    ["packages (node_modules/)", packages],
    ["garbage collection", collector],
    ["the rest (Node's internals, native calls, the bench)", busy - own - packages - collector],
  ]),
);

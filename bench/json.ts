/**
 * What the loop spends on each tool output before it is journaled (issue 15): its JSON form (the
 * copy), its canonical text, its digest, and all of recordedOutput, beside the floor of
 * `JSON.stringify` + sha256 (no sorting, no copy). CPU time per output (process.cpuUsage, best of
 * the rounds) on the outputs bench/loop.ts feeds its run, and the heap each one allocates (the
 * garbage the collector then pays for: it was ~20% of the loop's CPU).
 *
 *   node --expose-gc --min-semi-space-size=64 --import tsx bench/json.ts
 */
import { canonicalJson, withCanonicalBytes } from "../src/core/canonicalJson.ts";
import { digestOfRecorded, sha256Hex } from "../src/core/digest.ts";
import { jsonRoundTrip } from "../src/core/jsonForm.ts";
import { recordedOutput } from "../src/runtime/base/callResult.ts";
import { printResult, printTable, rng, toolOutput } from "./support.ts";

const ROUNDS = Number(process.env.JSON_ROUNDS ?? 100);
const next = rng(7); // the outputs bench/loop.ts makes
const outputs = Array.from({ length: 200 }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));
const copies = outputs.map((o) => jsonRoundTrip(o));

const methods: { name: string; run: () => unknown }[] = [
  { name: "jsonRoundTrip (the copy)", run: () => outputs.map((o) => jsonRoundTrip(o)) },
  { name: "canonicalJson of the copy (text)", run: () => copies.map((c) => canonicalJson(c)) },
  { name: "canonical bytes of the copy", run: () => copies.map((c) => withCanonicalBytes(c, (b) => b.length)) },
  { name: "digestOfRecorded of the copy", run: () => copies.map((c) => digestOfRecorded(c)) },
  {
    name: "recordedOutput (copy + digest, kept)",
    run: () => Promise.all(outputs.map((o) => recordedOutput(o, undefined))),
  },
  { name: "floor: JSON.stringify + sha256", run: () => copies.map((c) => sha256Hex(JSON.stringify(c))) },
];

const cpuNow = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};
const gc = (globalThis as { gc?: () => void }).gc;

/** Heap allocated by one pass (KiB per output), when run with --expose-gc; the young space must hold a pass. */
async function allocated(run: () => unknown): Promise<number | string> {
  if (!gc) return "(--expose-gc)";
  gc();
  const before = process.memoryUsage().heapUsed;
  await run();
  return (process.memoryUsage().heapUsed - before) / outputs.length / 1024;
}

const best = new Map<string, number>();
for (let r = 0; r < ROUNDS; r++) {
  for (const m of methods) {
    const t = cpuNow();
    await m.run();
    const us = ((cpuNow() - t) / outputs.length) * 1000;
    best.set(m.name, Math.min(best.get(m.name) ?? Number.POSITIVE_INFINITY, us));
  }
}
const rows: Record<string, string | number>[] = [];
for (const m of methods) {
  rows.push({ step: m.name, "CPU µs/output": best.get(m.name) ?? 0, "heap KiB/output": await allocated(m.run) });
}
const bytes = copies.reduce<number>((n, c) => n + Buffer.byteLength(canonicalJson(c)), 0) / copies.length;
printTable(
  `A tool output's JSON form, canonical text and digest (${outputs.length} outputs, ${Math.round(bytes)} B canonical on average; best of ${ROUNDS})`,
  rows,
);
// No target of its own: what each step costs, beside bench/loop.ts's rows.
printResult("json", { canonicalBytesPerOutput: Math.round(bytes) });

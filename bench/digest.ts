/**
 * Throughput of the digest path: canonicalJson + sha256 beside JSON.stringify + sha256 (the
 * floor: no sorting) and canonicalize@4 + sha256 (the RFC 8785 reference), in one run.
 * Targets: canonicalJson at 0.5× or better of JSON.stringify; faster than canonicalize@4.
 *
 *   node --import tsx bench/digest.ts
 */
import canonicalize from "canonicalize";
import { canonicalJson, sha256Hex } from "../src/core/index.ts";
import { opsPerSecond, printResult, printTable, rng, toolOutput } from "./support.ts";

const reference = canonicalize as unknown as (v: unknown) => string;
const next = rng(42);
const small = Array.from({ length: 200 }, () => toolOutput(next, 1500 + Math.floor(next() * 2500)));
const large = toolOutput(next, 1_000_000);

const workloads: { name: string; values: unknown[] }[] = [
  { name: "tool outputs 1.5–4 kB (200)", values: small },
  { name: "one 1 MB value", values: [large] },
];
const methods: { name: string; text: (v: unknown) => string }[] = [
  { name: "JSON.stringify+sha256", text: (v) => JSON.stringify(v) },
  { name: "canonicalJson+sha256", text: canonicalJson },
  { name: "canonicalize@4+sha256", text: reference },
];

const rows: Record<string, string | number>[] = [];
for (const w of workloads) {
  const bytes = w.values.reduce<number>((n, v) => n + Buffer.byteLength(JSON.stringify(v)), 0);
  const mbps: Record<string, number> = {};
  for (const m of methods) {
    const ops = opsPerSecond(() => {
      for (const v of w.values) sha256Hex(m.text(v));
    }, 1500);
    mbps[m.name] = (ops * bytes) / 1e6;
  }
  const floor = mbps["JSON.stringify+sha256"] ?? 1;
  const ours = mbps["canonicalJson+sha256"] ?? 0;
  const ref = mbps["canonicalize@4+sha256"] ?? 1;
  rows.push({
    workload: w.name,
    ...Object.fromEntries(Object.entries(mbps).map(([k, v]) => [`${k} MB/s`, v])),
    "ours / stringify": ours / floor,
    "ours / canonicalize": ours / ref,
  });
}
printTable("Digest throughput (higher is better; target ours/stringify ≥ 0.5, ours/canonicalize > 1)", rows);
const lowest = (key: string) => Math.min(...rows.map((r) => Number(r[key])));
const vsStringify = lowest("ours / stringify");
const vsCanonicalize = lowest("ours / canonicalize");
printResult("digest", {
  targets: { vsStringify: "≥ 0.5", vsCanonicalize: "> 1" },
  vsStringify,
  vsCanonicalize,
  met: vsStringify >= 0.5 && vsCanonicalize > 1,
});

/**
 * diffRuns over a generated mutation suite (600 cases: a hundred each of an inserted call, a
 * removed one, one moved, one call's argument changed and one call's status changed, and a
 * hundred mixes of two to five), each checked against its ground truth: alignment must be 100%
 * correct. Then the cost of diffing the 200-turn demo-sized logs: identical, and with one change.
 *
 *   node --import tsx bench/diff.ts
 */

import { diffRuns } from "../src/projections/runDiff.ts";
import type { LeanAgentStep } from "../src/projections/types.ts";
import { alignmentProblems, diffCase, generate, type Mutation, mutationCases } from "../test/support/logMutations.ts";
import { printResult, printTable } from "./support.ts";

const cases = mutationCases(600);
const byKind = new Map<string, { cases: number; correct: number; ms: number }>();
let correct = 0;
for (const { seed, mutations, shape } of cases) {
  const { a, b } = generate(seed, mutations);
  const kind = mutations.length === 1 ? (mutations[0] as Mutation) : "mix";
  const start = performance.now();
  const diff = diffCase(a, b, shape);
  const ms = performance.now() - start;
  const ok = alignmentProblems(a, b, shape, diff).length === 0;
  if (ok) correct++;
  const row = byKind.get(kind) ?? { cases: 0, correct: 0, ms: 0 };
  row.cases++;
  row.correct += ok ? 1 : 0;
  row.ms += ms;
  byKind.set(kind, row);
}
printTable(
  "alignment over the mutation suite",
  [...byKind].map(([kind, r]) => ({
    mutation: kind,
    cases: r.cases,
    correct: r.correct,
    "correct %": (100 * r.correct) / r.cases,
    "µs per diff": (1000 * r.ms) / r.cases,
  })),
);

// A 200-turn run's lean log, one call a turn, diffed against itself and against one changed argument.
const log: LeanAgentStep[] = Array.from({ length: 200 }, (_, i) => ({
  iteration: i,
  toolName: i % 3 === 0 ? "search" : "fetch",
  toolInput: { id: i, query: `q-${i}`, opts: { limit: 10, tags: ["a", "b"] } },
  status: "ok",
  bytes: 2000,
  digest: `${i}`.padStart(64, "0"),
  stepId: `demo#turn:${i}:tool:0`,
}));
const changed = log.map((s, i) =>
  i === 100 ? { ...s, toolInput: { ...(s.toolInput as object), query: "other" } } : s,
);
const time = (fn: () => unknown, rounds = 50) => {
  fn();
  const start = performance.now();
  for (let i = 0; i < rounds; i++) fn();
  return (performance.now() - start) / rounds;
};
const identicalMs = time(() => diffRuns(log, log));
const oneChangeMs = time(() => diffRuns(log, changed));
printTable("a 200-call lean log", [
  { diff: "identical", ms: identicalMs, identical: String(diffRuns(log, log).identical) },
  { diff: "one argument changed", ms: oneChangeMs, identical: String(diffRuns(log, changed).identical) },
]);

const accuracy = correct / cases.length;
printResult("diff", {
  cases: cases.length,
  correct,
  alignmentAccuracy: accuracy,
  target: { alignmentAccuracy: 1, cases: 500 },
  met: accuracy === 1 && cases.length >= 500,
  identical200Ms: identicalMs,
  oneChange200Ms: oneChangeMs,
});

/**
 * ADR 0142's measurement, repeated: a completed 200-turn run, one tool call a turn, tool outputs
 * of 1.5–4 kB (fixed seed), run by the real loop (`agentLoop$`, a scripted model, a JSON memory
 * journal). For each of full, lean, full + claim-check and lean + claim-check it prints the folded
 * state's size as the record measured it (JSON of the RunState a resume reads, with `_output`
 * holding the run's value, tool-call log included) and the `_output` size (the value the loop
 * returned), beside the record's figures. Targets: lean `_output` ≤ 7% of full `_output`; each
 * state figure at or below the record's. Loom's own fold keeps less: `run.completed` records only
 * `{ content, iterations }` and the log is rebuilt from the frames when the value is returned, so
 * the last column shows the state as `foldRun` really returns it (the same in both shapes).
 *
 *   node --import tsx bench/leanToolCallLog.ts
 */

import { memoryBlobStore } from "../src/events/blobs.ts";
import { createJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import type { ToolCallLogMode } from "../src/projections/types.ts";
import type { Tool } from "../src/runtime/base/config.ts";
import { foldRun, rebuildToolCallLog } from "../src/runtime/base/readers.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printResult, printTable, rng, toolOutput } from "./support.ts";

const TURNS = 200;
const SEED = 142;
/** Every 1.5–4 kB output goes to the blob store when the claim-check is on. */
const CLAIM_CHECK_THRESHOLD = 1024;

// Target sizes evenly spaced over 1.5–4 kB, in a seeded random order: the total (which the
// state figures are mostly made of) is then fixed by the range, not by the luck of a seed.
const next = rng(SEED);
const targets = Array.from({ length: TURNS }, (_, i) => 1500 + Math.round((2500 * (i + 0.5)) / TURNS));
for (let i = targets.length - 1; i > 0; i--) {
  const j = Math.floor(next() * (i + 1));
  [targets[i], targets[j]] = [targets[j] as number, targets[i] as number];
}
const outputs = targets.map((t) => toolOutput(next, t));
const outputBytes = outputs.reduce((sum, o) => sum + Buffer.byteLength(JSON.stringify(o), "utf8"), 0);

/** The record's figures (leanToolCallLog.perf.test.ts), in KB. */
const RECORD: Record<string, { state: number; output?: number }> = {
  full: { state: 1201.5, output: 554.7 },
  lean: { state: 683.4, output: 36.6 },
  "full + claim-check": { state: 295.6, output: 101.8 },
  "lean + claim-check": { state: 230.3 },
};

const kb = (text: string) => Buffer.byteLength(text, "utf8") / 1024;

async function measure(mode: ToolCallLogMode, claimCheck: boolean) {
  const lookup: Tool = { description: "looks things up", execute: (input) => outputs[(input as { n: number }).n] };
  const model = scriptedModel(({ turn }) =>
    turn < TURNS
      ? { toolCalls: [{ id: `c${turn}`, name: "lookup", input: { n: turn } }] }
      : { content: "done", toolCalls: [] },
  );
  const blobs = memoryBlobStore();
  const loop = agentLoop$({
    id: "bench",
    model,
    tools: { lookup },
    maxIterations: TURNS + 1,
    toolCallLog: mode,
    ...(claimCheck ? { claimCheck: { blobs, thresholdBytes: CLAIM_CHECK_THRESHOLD } } : {}),
  });
  const journal = createJournal({ store: memoryStore({ json: true }), blobs });
  const runId = `run-${mode}-${claimCheck}`;
  const returned = await loop.run({ runId, journal, input: "look everything up" });
  const state = await foldRun(journal, runId);
  // The log the loop returned is the projection of its journal, in its shape.
  const rebuilt = await rebuildToolCallLog(journal, runId, mode);
  if (JSON.stringify(rebuilt) !== JSON.stringify(returned.toolCallLog)) {
    throw new Error(`${runId}: the rebuilt ${mode} log differs from the one the loop returned`);
  }
  if (returned.toolCallLog.length !== TURNS || state.status !== "completed") {
    throw new Error(`${runId}: expected a completed run with ${TURNS} tool calls`);
  }
  return {
    state: kb(JSON.stringify({ ...state, _output: returned })),
    output: kb(JSON.stringify(returned)),
    fold: kb(JSON.stringify(state)),
  };
}

const rows: Record<string, string | number>[] = [];
const measured: Record<string, { state: number; output: number; fold: number }> = {};
for (const [name, mode, claimCheck] of [
  ["full", "full", false],
  ["lean", "lean", false],
  ["full + claim-check", "full", true],
  ["lean + claim-check", "lean", true],
] as const) {
  const m = await measure(mode, claimCheck);
  measured[name] = m;
  const record = RECORD[name];
  rows.push({
    config: name,
    "state KB": m.state,
    "record state KB": record?.state ?? "",
    "state ≤ record": record && m.state <= record.state ? "yes" : "NO",
    "_output KB": m.output,
    "record _output KB": record?.output ?? "",
    // What the state holds besides the tool outputs' own bytes (once in the frames, plus once in a full log).
    "state − outputs KB": m.state - (claimCheck ? 0 : (mode === "full" ? 2 : 1) * (outputBytes / 1024)),
    "foldRun state KB": m.fold,
  });
}

const pct = (a: number | undefined, b: number | undefined) => (a !== undefined && b ? (100 * a) / b : Number.NaN);
printTable(
  `ADR 0142: completed ${TURNS}-turn run, one tool call a turn, outputs 1.5–4 kB (seed ${SEED}; ${(outputBytes / 1024).toFixed(1)} KB of tool output in all; KB = 1024 bytes)`,
  rows,
);
const leanShare = pct(measured.lean?.output, measured.full?.output);
const leanShareCc = pct(measured["lean + claim-check"]?.output, measured["full + claim-check"]?.output);
printTable("Ratios (same run)", [
  {
    ratio: "lean _output / full _output",
    measured: `${leanShare.toFixed(1)}%`,
    record: `${pct(36.6, 554.7).toFixed(1)}%`,
    target: "≤ 7%",
    met: leanShare <= 7 ? "yes" : "NO",
  },
  {
    ratio: "lean state / full state",
    measured: `${pct(measured.lean?.state, measured.full?.state).toFixed(1)}%`,
    record: `${pct(683.4, 1201.5).toFixed(1)}%`,
    target: "",
    met: "",
  },
  {
    ratio: "lean _output / full _output, claim-check",
    measured: `${leanShareCc.toFixed(1)}%`,
    record: "",
    target: "",
    met: "",
  },
  {
    ratio: "lean state / full state, claim-check",
    measured: `${pct(measured["lean + claim-check"]?.state, measured["full + claim-check"]?.state).toFixed(1)}%`,
    record: `${pct(230.3, 295.6).toFixed(1)}%`,
    target: "",
    met: "",
  },
]);
printResult("leanToolCallLog", {
  target: "lean _output / full _output ≤ 7%",
  leanSharePct: leanShare,
  leanShareClaimCheckPct: leanShareCc,
  met: leanShare <= 7,
});

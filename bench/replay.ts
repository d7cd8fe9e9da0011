/**
 * replayRun over the demo's 200-turn run: the unchanged demo agent replayed with model and tools
 * served from the record (target: under 1 s, 0 tool executions, the diff identical), and the
 * same replay with the model live (the demo's model is deterministic: the same calls again).
 *
 *   node --import tsx bench/replay.ts
 */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { demoLoop, demoPrompt } from "../src/cli/demo/loop.ts";
import { packageRoot } from "../src/cli/packageRoot.ts";
import { openSqliteJournal } from "../src/events/journal.ts";
import { replayRun } from "../src/runtime/run/replayRun.ts";
import { printResult, printTable } from "./support.ts";

const TURNS = 200;
const dir = mkdtempSync(join(tmpdir(), "loom-bench-replay-"));
const journal = openSqliteJournal(join(dir, "loom.db"));
try {
  const root = packageRoot();
  const recorded = demoLoop({ root, journal, runId: "demo-1" });
  await recorded.run({ runId: "demo-1", journal, input: demoPrompt(TURNS) });

  const rows: Record<string, string | number>[] = [];
  let recordedMs = 0;
  let executed = 0;
  let identical = false;
  for (const model of ["recorded", "live"] as const) {
    const candidate = demoLoop({ root, journal, runId: "demo-1" });
    const start = performance.now();
    const replay = await replayRun(journal, "demo-1", { loop: candidate, model });
    const ms = performance.now() - start;
    if (replay.error) throw replay.error;
    rows.push({
      model,
      ms,
      "tools served": replay.counts.servedTools,
      "tools executed": candidate.toolCalls(),
      "model calls served": replay.counts.servedModelCalls,
      identical: String(replay.diff.identical),
    });
    if (model === "recorded") {
      recordedMs = ms;
      executed = candidate.toolCalls();
      identical = replay.diff.identical;
    }
  }
  printTable(`replay of the ${TURNS}-turn demo run (unchanged agent)`, rows);
  printResult("replay", {
    turns: TURNS,
    recordedMs,
    toolExecutions: executed,
    identical,
    target: { recordedMs: 1000, toolExecutions: 0, identical: true },
    met: recordedMs < 1000 && executed === 0 && identical,
  });
} finally {
  await journal.close();
  rmSync(dir, { recursive: true, force: true });
}

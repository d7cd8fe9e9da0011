import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { deliverEvent } from "../../src/runtime/control/events.ts";
import { tempDir } from "../events/tmp.ts";
import { startWorker as startProcess } from "../support/processes.ts";
import { loops } from "./workers/waitLoops.ts";

/**
 * An event delivered to a run whose process is gone, on SQLite (issue 31's "Must show"): the
 * process that started the run is SIGKILLed while the run waits; then the event is delivered
 * (`loom deliver`, a process of its own, or `deliverEvent`) and the run resumed by `loom wake`
 * (another process) or by the next `loop.run`. The tool is not run again; the model gets the payload.
 */

const SCRIPT = "test/runtime/workers/eventProcess.ts";
const LOOPS = "test/runtime/workers/waitLoops.ts";
const STEP = "payer#turn:0:tool:0";
let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-event-process-");
});
afterAll(() => tmp.remove());

/** Starts the run in a process of its own and SIGKILLs that process once the run waits; the token. */
async function startAndKill(db: string, runId: string): Promise<string> {
  const p = startProcess(SCRIPT, ["start", db, runId]);
  await p.waitFor((l) => l === "waiting", "the run waits");
  p.child.kill("SIGKILL");
  expect((await p.exited).signal).toBe("SIGKILL");
  const tokens = p.lines.filter((l) => l.startsWith("token ")).map((l) => l.slice("token ".length));
  expect(tokens).toHaveLength(1); // the tool ran once
  return tokens[0] as string;
}

/** `loom <args>` in a process of its own; its exit code and output. */
async function loomProcess(args: string[]) {
  const p = startProcess("src/cli/bin.ts", args);
  const { code } = await p.exited;
  return { code, stdout: p.lines.join("\n"), stderr: p.stderr() };
}

async function checkResumedOnce(db: string, runId: string, payload: unknown) {
  const journal = openSqliteJournal(db);
  try {
    const entries = await readJournal(journal, runId);
    const ofStep = (type: string) =>
      entries.filter((e) => e.type === type && (e.data as { frameId?: string }).frameId === STEP);
    expect(ofStep("frame.started")).toHaveLength(1);
    expect(ofStep("frame.completed").map((e) => (e.data as { output?: unknown }).output)).toEqual([payload]);
    expect(entries.filter((e) => e.type === "run.interrupted")).toHaveLength(1);
    expect(entries.at(-1)?.type).toBe("run.completed");
  } finally {
    await journal.close();
  }
}

describe("an event delivered to a run whose process is gone (SQLite)", () => {
  it("loom deliver, then loom wake (each a process of its own) resumes it once", async () => {
    const db = tmp.file("wake.db");
    const token = await startAndKill(db, "pay-wake");
    const early = await loomProcess(["wake", "--db", db, "--loops", LOOPS, "--json"]);
    expect([early.code, JSON.parse(early.stdout)]).toEqual([
      0,
      [expect.objectContaining({ runId: "pay-wake", outcome: "not-due" })],
    ]);
    const delivered = await loomProcess(["deliver", token, "--db", db, "--payload", '{"paid":12}']);
    expect([delivered.code, delivered.stdout]).toEqual([0, expect.stringContaining("run pay-wake: delivered to pay")]);
    const woken = await loomProcess(["wake", "--db", db, "--loops", LOOPS, "--json"]);
    expect([woken.code, JSON.parse(woken.stdout)]).toEqual([
      0,
      [expect.objectContaining({ runId: "pay-wake", outcome: "completed" })],
    ]);
    await checkResumedOnce(db, "pay-wake", { paid: 12 });
  }, 60_000);

  it("deliverEvent, then the next loop.run resumes it once", async () => {
    const db = tmp.file("run.db");
    const token = await startAndKill(db, "pay-run");
    const journal = openSqliteJournal(db);
    try {
      await deliverEvent(journal, token, { paid: 7 });
      const out = await loops[0]!.run({ runId: "pay-run", journal });
      expect(out.content).toBe("done");
      expect(out.toolCallLog[0]?.toolOutput).toEqual({ paid: 7 });
    } finally {
      await journal.close();
    }
    await checkResumedOnce(db, "pay-run", { paid: 7 });
  }, 60_000);
});

import type { AgentOutput, OpenJournal } from "../index.ts";
import type { RunState } from "../journal.ts";
import { DEMO_LOOP_ID, demoTurns } from "./demo/loop.ts";
import { runDemoSession } from "./demo/session.ts";
import type { Progress } from "./progress.ts";

/**
 * The loops this command can rebuild to resume a run: a run is resumed by the code that defines
 * its loop (its tools and model), so the CLI knows only its own. Other programs resume their runs
 * with `loop.run({ runId, journal })`.
 */
export interface KnownLoop {
  /** Turns the run will make, read from its recorded input (for the progress bar). */
  turns(state: RunState): number | undefined;
  resume(request: {
    readonly journal: OpenJournal;
    readonly runId: string;
    readonly root: string;
    readonly onProgress: (p: Progress) => void;
  }): Promise<{ readonly output: AgentOutput; readonly modelCalls: number; readonly toolCalls: number }>;
}

/** By loop id; a Map, so a run's recorded loop id (`constructor`, `__proto__`) never reaches a prototype. */
export const KNOWN_LOOPS: ReadonlyMap<string, KnownLoop> = new Map([
  [
    DEMO_LOOP_ID,
    {
      turns: (state: RunState) => demoTurns(state.input),
      resume: (request: Parameters<KnownLoop["resume"]>[0]) => runDemoSession(request),
    },
  ],
]);

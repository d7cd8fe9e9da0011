import { type AgentOutput, type OpenJournal, readJournal } from "../../index.ts";
import { countingJournal, type Progress, progressOf } from "../progress.ts";
import { demoLoop, demoPrompt } from "./loop.ts";

export interface DemoSessionOptions {
  readonly journal: OpenJournal;
  readonly runId: string;
  readonly root: string;
  /** Start a new run of this many turns; omitted: resume `runId` from its journal. */
  readonly turns?: number;
  readonly onProgress?: (p: Progress) => void;
  readonly beforeTool?: (stepId: string) => Promise<void>;
}

export interface DemoSessionResult {
  readonly output: AgentOutput;
  /** What this call ran (the rest was served from the journal). */
  readonly modelCalls: number;
  readonly toolCalls: number;
}

/**
 * Runs (or resumes) a demo run against `journal`, reporting progress on every append. Used by the
 * demo's worker process, by the demo's resume and by `loom resume`.
 */
export async function runDemoSession(options: DemoSessionOptions): Promise<DemoSessionResult> {
  const { journal, runId, root } = options;
  const start = progressOf(await readJournal(journal, runId));
  const counted = countingJournal(journal, start, options.onProgress ?? (() => {}));
  const loop = demoLoop({ root, journal, runId, ...(options.beforeTool ? { beforeTool: options.beforeTool } : {}) });
  const output = await loop.run({
    runId,
    journal: counted,
    ...(options.turns === undefined ? {} : { input: demoPrompt(options.turns) }),
  });
  const model = loop.config.model as { readonly calls?: number };
  return { output, modelCalls: model.calls ?? 0, toolCalls: loop.toolCalls() };
}

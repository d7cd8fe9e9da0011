import type { Journal } from "../index.ts";
import { isStepResolutionError } from "../journal.ts";
import * as read from "../read/step.ts";
import { CliError } from "./io.ts";

export type { ShownStep } from "../read/step.ts";

/**
 * `showStep` (src/read/step.ts) for `loom show <stepId>`: a step id more than one run holds is
 * told in the command's terms (`--run <runId>`).
 */
export async function showStep(journal: Journal, stepId: string, runId: string | undefined): Promise<read.ShownStep> {
  try {
    return await read.showStep(journal, stepId, runId);
  } catch (e) {
    if (isStepResolutionError(e) && e.code === "ambiguousStep") {
      throw new CliError("ambiguousStep", e.message.replace("pass { runId } to resolveStep", "pass --run <runId>"));
    }
    throw e;
  }
}

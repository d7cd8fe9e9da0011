import { digestOf } from "../core/digest.ts";
import { IntegrityError } from "../core/errors.ts";
import type { Journal } from "../events/spi.ts";
import type { RunState } from "../projections/runState.ts";

/**
 * Puts the outputs of archived frames back into a folded state (for a resume and for the full
 * log), one archive read per batch, each output verified against the digest in its marker.
 */
export async function hydrateArchivedFrames(journal: Journal, state: RunState): Promise<void> {
  const byRef = new Map<string, string[]>();
  for (const frame of Object.values(state.frames)) {
    if (!frame.archived || frame.status !== "completed" || frame.output !== undefined) continue;
    const ids = byRef.get(frame.archived.ref) ?? [];
    ids.push(frame.frameId);
    byRef.set(frame.archived.ref, ids);
  }
  if (byRef.size === 0) return;
  if (!journal.archive) {
    throw new IntegrityError(
      `run ${state.runId}: frames were compacted into an archive, but the journal has no archive store; open it with the archive it was compacted into`,
      "archiveMissing",
    );
  }
  for (const [ref, ids] of byRef) {
    const frames = new Map((await journal.archive.get(ref)).map((f) => [f.frameId, f]));
    for (const id of ids) {
      const frame = state.frames[id];
      const archived = frames.get(id);
      if (!frame?.archived || !archived) {
        throw new IntegrityError(`run ${state.runId}: archive ${ref} does not hold frame ${id}`, "archiveIncomplete");
      }
      const output = archived.completed.data.output;
      if (digestOf(output).digest !== frame.archived.digest) {
        throw new IntegrityError(
          `run ${state.runId}: archived frame ${id} does not match the digest in its frames.archived marker; the archive was altered`,
        );
      }
      frame.output = output;
    }
  }
}

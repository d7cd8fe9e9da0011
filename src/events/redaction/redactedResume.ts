import type { DataKeyStore } from "../dataKeys.ts";
import { isRunBelow, runsBelowPrefix } from "../ids.ts";
import type { Journal } from "../spi.ts";
import { keeperOf, keptOriginalsOf } from "./redactedOriginals.ts";

/**
 * What becomes of a redacted run's resume: why it would be refused (for the resume's error and
 * for readers that would otherwise advise it), and forgetting its originals for good.
 */

/** The data key store the journal's originals are kept in, if any. */
const keyStoreOf = (journal: Journal): DataKeyStore | undefined => keeperOf(journal)?.keys ?? journal.dataKeys;

/**
 * Why a redacted run cannot be resumed: `notKept` (its journal kept no original of the entry at
 * `seq`, or not of all its fields) or `forgotten` (they were kept, and the key that opens them is
 * gone, or the journal was opened without `keepOriginals`).
 */
export async function whyNotResumable(journal: Journal, runId: string, seq: number): Promise<"notKept" | "forgotten"> {
  const [entry] = await journal.store.read(runId, { from: seq });
  return entry !== undefined && keptOriginalsOf(entry.data) !== undefined ? "forgotten" : "notKept";
}

/**
 * Forgets the originals of a run's redacted payloads (crypto-shredding): deletes the run's data
 * key, and its sub-agent runs' (`<runId>/…`), from the journal's data key store. The sealed
 * originals stay in the entries, in backups and archives, and can no longer be opened by anyone;
 * the run is then one whose originals were never kept (a resume is refused with
 * `RedactedHistoryError`). Resolves to the runs whose key was deleted.
 *
 * @example
 * await forgetRedactedOriginals(journal, "r-1"); // ["r-1"]: r-1's originals are gone for good
 */
export async function forgetRedactedOriginals(journal: Journal, runId: string): Promise<string[]> {
  const keeper = keeperOf(journal);
  const keys = keeper?.keys ?? journal.dataKeys;
  if (keys === undefined) return [];
  const runs = [runId, ...(await journal.store.listRuns({ prefix: runsBelowPrefix(runId) })).map((r) => r.runId)];
  const gone: string[] = [];
  for (const run of runs) {
    if (run !== runId && !isRunBelow(run, runId)) continue; // a store that ignores the prefix
    keeper?.cache.delete(run);
    if (await keys.delete(run)) gone.push(run);
  }
  return gone;
}

/**
 * Whether a resume of a run whose state is `state` would be refused because of redaction, and
 * why in words (for readers that advise a resume); undefined when it would not be.
 */
export async function redactedResumeRefusal(
  journal: Journal,
  state: { readonly redacted?: { readonly seq: number; readonly unkept?: number; readonly keys?: readonly string[] } },
): Promise<string | undefined> {
  const r = state.redacted;
  if (r === undefined) return undefined;
  if (r.unkept !== undefined) return refusalText(r.unkept, false);
  const keys = keyStoreOf(journal);
  for (const run of r.keys ?? []) {
    if (keys === undefined || (await keys.get(run)) === undefined) return refusalText(r.seq, true);
  }
  return undefined;
}

/** The words readers print for a redacted run that cannot be resumed. */
export const refusalText = (seq: number, forgotten: boolean): string =>
  `cannot be resumed: redacted at seq ${seq} with ${forgotten ? "its originals' key forgotten" : "no original kept"}; start a new run, or fork it before seq ${seq} and resume the fork`;

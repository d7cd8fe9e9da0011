import { digestOf, sha256Hex } from "../../core/digest.ts";
import { errorGuard, IntegrityError, LoomError } from "../../core/errors.ts";
import { type ClaimCheckEnvelope, claimCheckOf, isClaimCheckEnvelope } from "../../events/claimCheck.ts";
import { decodesBlobs } from "../../events/codec/codecStore.ts";
import { contextDecisionId, modelFrameId, parseFrameId, toolStepId } from "../../events/ids.ts";
import { readJournal } from "../../events/journal.ts";
import { readArchived } from "../../events/readArchived.ts";
import type { RedactionRecord } from "../../events/redaction/redact.ts";
import type { ArchivedFrame, Journal } from "../../events/spi.ts";
import type { JournalEntry, Message, ToolCall } from "../../events/types.ts";
import { validateToolCallLogMode } from "../../machines/modePin.machine.ts";
import { foldEntries, type RunState, responseAt } from "../../projections/runState.ts";
import { projectToolCallLog, toolCallResult } from "../../projections/toolCallLog.ts";
import type { AgentStep, LeanAgentStep, ToolCallLogMode } from "../../projections/types.ts";
import {
  assistantMessage,
  chainedPromptDigest,
  contextPromptDigest,
  fedFromState,
  resolveClaimCheck,
  toolResultMessage,
} from "./conversation.ts";
import { readRunState, type SnapshotReadOptions } from "./snapshots.ts";

/**
 * Readers that await the journal: fold a run, read archived outputs back, rebuild the log,
 * resolve a step's output. The projections they call stay pure.
 */

/** A step id that cannot be resolved: unknown, in more than one run, or not ended yet. */
export class StepResolutionError extends LoomError {
  declare readonly code: "unknownStep" | "ambiguousStep" | "stepNotEnded";
  readonly stepId: string;
  constructor(code: "unknownStep" | "ambiguousStep" | "stepNotEnded", stepId: string, message: string) {
    super(code, message);
    this.stepId = stepId;
  }
}

/** True when `e` is a `StepResolutionError`. */
export const isStepResolutionError = errorGuard(StepResolutionError);

/**
 * Reads a run's journal (validated) and folds it: what a resume reads. Where the store keeps
 * snapshots (`AgentLoopConfig.snapshots`, `writeRunSnapshot`), only the entries after the latest
 * one are read; a snapshot that does not check out is told to `options.onSnapshotWarning` and the
 * whole journal is folded. Archived frames keep only their digests; {@link hydrateArchived} reads
 * their outputs back.
 *
 * @example
 * const state = await foldRun(journal, "run-1");
 * state.status; // "completed"; state._output is the loop's value
 */
export async function foldRun(journal: Journal, runId: string, options?: SnapshotReadOptions): Promise<RunState> {
  const onSnapshotWarning = options?.onSnapshotWarning; // never a compact state: a full read
  return (await readRunState(journal, runId, onSnapshotWarning ? { onSnapshotWarning } : undefined)).state;
}

/** Which archived frames to read back. */
export interface HydrateOptions {
  /** `"model"`: only model frames (what the lean log needs to name its calls); default all. */
  readonly only?: "model";
}

/**
 * Reads the outputs of archived frames back into `state` (one archive read per batch), each
 * verified against the digest in its `frames.archived` marker (`IntegrityError` on a mismatch).
 * Then the state equals the fold of the uncompacted journal. Needed for the full log and for a resume; the lean log only needs
 * archived model frames. Returns `state`.
 *
 * @example
 * const state = await hydrateArchived(journal, await foldRun(journal, "run-1"));
 * projectToolCallLog(state, "full");
 */
export async function hydrateArchived(journal: Journal, state: RunState, options?: HydrateOptions): Promise<RunState> {
  const byRef = new Map<string, string[]>();
  for (const frame of Object.values(state.frames)) {
    if (!frame.archived || frame.status !== "completed" || "output" in frame) continue;
    if (options?.only === "model" && parseFrameId(frame.frameId)?.kind !== "model") continue;
    const ids = byRef.get(frame.archived.ref);
    if (ids) ids.push(frame.frameId);
    else byRef.set(frame.archived.ref, [frame.frameId]);
  }
  for (const [ref, ids] of byRef) {
    const batch = await archiveBatch(journal, state.runId, ref);
    for (const id of ids) {
      const data = verifiedArchivedData(state, id, batch.get(id), ref);
      const frame = state.frames[id];
      if (!frame) continue;
      frame.output = data.output;
      const claimCheck = claimCheckOf(data); // the mark travels with the archived entry
      if (claimCheck) frame.claimCheck = claimCheck;
    }
  }
  return state;
}

/**
 * Reads back what the log in `mode`'s shape needs of the archive: every archived output for the
 * full shape, only model frames for the lean one (its markers carry the tool outputs' digests).
 */
export function hydrateForLog(journal: Journal, state: RunState, mode: ToolCallLogMode): Promise<RunState> {
  return hydrateArchived(journal, state, mode === "lean" ? { only: "model" } : undefined);
}

async function archiveBatch(journal: Journal, runId: string | undefined, ref: string) {
  if (!journal.archive) {
    throw new IntegrityError(
      `run ${runId}: frames were compacted into archive ${ref}, but the journal has no archive store; open the journal with the archive it was compacted into`,
      "archiveMissing",
    );
  }
  return new Map((await journal.archive.get(ref)).map((f) => [f.frameId, f]));
}

function verifiedArchivedData(state: RunState, frameId: string, archived: ArchivedFrame | undefined, ref: string) {
  const marker = state.frames[frameId]?.archived;
  if (!archived || !marker) {
    throw new IntegrityError(
      `run ${state.runId}: archive ${ref} does not hold frame ${frameId}, which its frames.archived marker lists; restore the archive from a backup`,
      "archiveIncomplete",
    );
  }
  const output = archived.completed.data.output;
  const actual = digestOf(output);
  if (actual.digest !== marker.digest || actual.bytes !== marker.bytes) {
    throw new IntegrityError(
      `run ${state.runId}: archived frame ${frameId} (archive ${ref}) hashes to ${actual.digest} (${actual.bytes} bytes), not the ${marker.digest} (${marker.bytes} bytes) its frames.archived marker records; the archive was altered: restore it from a backup`,
    );
  }
  return archived.completed.data;
}

/**
 * The run's tool-call log in `mode`'s shape, rebuilt from the journal at any point of the run's
 * life: mid-run (only ended calls appear), interrupted, completed, after compaction. The lean
 * shape reads no archived tool output (the markers carry the digests); the full shape reads them
 * back, verified. For a completed run it equals the log the loop returned in that shape.
 *
 * @example
 * const log = await rebuildToolCallLog(journal, "run-1", "lean");
 * log[0]; // { iteration: 0, toolName: "search", toolInput, status: "ok", bytes, digest, stepId }
 */
export async function rebuildToolCallLog(journal: Journal, runId: string, mode: "full"): Promise<AgentStep[]>;
export async function rebuildToolCallLog(journal: Journal, runId: string, mode: "lean"): Promise<LeanAgentStep[]>;
export async function rebuildToolCallLog(
  journal: Journal,
  runId: string,
  mode: ToolCallLogMode,
): Promise<AgentStep[] | LeanAgentStep[]>;
export async function rebuildToolCallLog(
  journal: Journal,
  runId: string,
  mode: ToolCallLogMode,
): Promise<AgentStep[] | LeanAgentStep[]> {
  const state = await foldRun(journal, runId);
  const valid = validateToolCallLogMode(mode, state.loopId ?? "?") ?? "full";
  await hydrateForLog(journal, state, valid);
  return projectToolCallLog(state, valid);
}

/** A step's output, resolved. */
export interface ResolvedStep {
  readonly runId: string;
  readonly stepId: string;
  /** Where it was found: a completed frame, a failed tool's outcome decision, a settled call, or the archive. */
  readonly source: "frame" | "outcome" | "settled" | "archive";
  /** The isError flag the model was fed. */
  readonly status: "ok" | "error";
  /** The full output: what the model was fed (a claim-checked output read from the blob store when there is one). */
  readonly output: unknown;
  /** digestOf the recorded output: equal to the lean entry's digest (it covers the envelope when claim-checked). */
  readonly digest: string | null;
  readonly bytes: number;
  /** The claim-check envelope the runtime recorded (and marked), when it claim-checked the output. */
  readonly claimCheck?: ClaimCheckEnvelope;
  /**
   * Set when redaction (`withRedaction`) replaced parts of the output: `output` is the redacted
   * value, and `digest`/`bytes` are the ORIGINAL's as the frame recorded them (the lean entry's),
   * which an auditor holding the original checks with `verifyRedacted`.
   */
  readonly redacted?: RedactionRecord;
}

/**
 * Resolves a step id (a lean entry's `stepId`, or any frame id) to its full output, from the
 * frame (verified against the digest it recorded), the outcome decision, the settled call or the
 * archive (verified against the marker's digest). A claim-checked output is read from `journal.blobs` when set (verified against the
 * envelope's digest); without a blob store, `output` is the envelope. Without `runId`, every run
 * of the journal is searched (pass it on a journal with many runs).
 *
 * @example
 * const step = await resolveStep(journal, lean[0].stepId, { runId: "run-1" });
 * step.digest === lean[0].digest; // true
 */
export async function resolveStep(
  journal: Journal,
  stepId: string,
  options?: { readonly runId?: string },
): Promise<ResolvedStep> {
  const { state, entries } = await runHolding(journal, stepId, options?.runId);
  const runId = state.runId as string;
  const result = toolCallResult(state, stepId);
  if (!result) {
    throw new StepResolutionError(
      "stepNotEnded",
      stepId,
      `run ${runId}: step ${stepId} has not ended (in flight, awaiting approval, or failed without its outcome decision); resume the run, then resolve it again`,
    );
  }
  let recorded = result.output;
  let source: ResolvedStep["source"] = result.source;
  // Only an envelope the runtime marked is resolved; any other envelope-shaped output is plain data.
  let envelope = result.source === "frame" ? state.frames[stepId]?.claimCheck : undefined;
  if (!result.hasOutput) {
    // readArchived verifies the frame against its marker (output digest, effect, input digest).
    const frame = await readArchived(journal, stepId, { runId, entries });
    recorded = frame?.completed.data.output;
    envelope = frame ? claimCheckOf(frame.completed.data) : undefined;
    source = "archive";
  }
  const redacted = source === "frame" ? state.frames[stepId]?.redacted?.find((r) => r.field === "output") : undefined;
  const vouched = source === "frame" ? result.recorded : undefined;
  if (redacted !== undefined && redacted.blob === undefined && vouched) {
    // The frame's digest is the original's (the lean log's); the output it holds is redacted.
    return { runId, stepId, source, status: result.status, ...vouched, output: recorded, redacted };
  }
  const { digest, bytes } = digestOf(recorded);
  if (vouched && (vouched.digest !== digest || vouched.bytes !== bytes)) {
    throw new IntegrityError(
      `run ${runId}: step ${stepId}'s output hashes to ${digest} (${bytes} bytes), not the ${vouched.digest} (${vouched.bytes} bytes) its frame recorded; the journal was altered: restore it from a backup`,
    );
  }
  const base = { runId, stepId, source, status: result.status, digest, bytes, ...(redacted ? { redacted } : {}) };
  if (!envelope || !journal.blobs) return { ...base, output: recorded };
  const blob = await journal.blobs.get(envelope.ref);
  // Through a codec the envelope's digest names the encoded bytes, which the store under it checked.
  if (!decodesBlobs(journal.blobs) && sha256Hex(blob) !== envelope.digest) {
    throw new IntegrityError(
      `run ${runId}: step ${stepId}'s blob ${envelope.ref} does not hash to the digest its claim-check envelope records; restore the blob store from a backup`,
    );
  }
  return { ...base, output: JSON.parse(Buffer.from(blob).toString("utf8")), claimCheck: envelope };
}

const toolFramesOf = (state: RunState, loopId: string, turn: number, calls: number) =>
  Array.from({ length: calls }, (_, j) => state.frames[toolStepId(loopId, turn, j)]);

async function runHolding(journal: Journal, stepId: string, runId: string | undefined) {
  // The run's latest snapshot (a compact one too) plus its tail; every entry when the step is
  // older than a compact state's frames (a full state holds every step).
  const read = async (id: string): Promise<{ state: RunState; entries?: JournalEntry[] }> => {
    const { state } = await readRunState(journal, id, { compact: true });
    const below = state.compacted?.belowTurn;
    const turn = parseFrameId(stepId)?.turn;
    if (below === undefined || turn === undefined || turn >= below) return { state };
    const entries = await readJournal(journal, id);
    return { state: foldEntries(entries), entries };
  };
  if (runId !== undefined) {
    const run = await read(runId);
    if (holds(run.state, stepId)) return run;
    throw new StepResolutionError(
      "unknownStep",
      stepId,
      `run ${runId} has no step ${stepId}; check the run id and the step id (a lean entry's stepId)`,
    );
  }
  const loopId = parseFrameId(stepId)?.loopId;
  const found: Awaited<ReturnType<typeof read>>[] = [];
  for (const summary of await journal.store.listRuns()) {
    const run = await read(summary.runId);
    if ((loopId === undefined || run.state.loopId === loopId) && holds(run.state, stepId)) found.push(run);
  }
  const [only, second] = found;
  if (!only) {
    throw new StepResolutionError(
      "unknownStep",
      stepId,
      `no run of this journal has a step ${stepId}; check the id (a lean entry's stepId) and the journal`,
    );
  }
  if (second) {
    throw new StepResolutionError(
      "ambiguousStep",
      stepId,
      `step ${stepId} exists in runs ${found.map((r) => r.state.runId).join(", ")}; pass { runId } to resolveStep`,
    );
  }
  return only;
}

function holds(state: RunState, stepId: string): boolean {
  return Object.hasOwn(state.frames, stepId) || Object.hasOwn(state.settled, stepId);
}

/**
 * Checks the results fed back after model call `turn` against what vouches for them: the prompt
 * digest that the next model call's frame recorded, chained from this call's (the same digest
 * the replay-divergence guard compares on a resume). `state` must have its archived outputs
 * hydrated ({@link hydrateArchived}); claim-checked outputs are read from `journal.blobs`.
 * Returns the id of the vouching model frame, or undefined while there is none (the run stopped
 * before its next model call). Throws `IntegrityError` when the results no longer hash to it.
 *
 * @example
 * const state = await hydrateArchived(journal, await foldRun(journal, "run-1"));
 * await verifyTurnResults(journal, state, 3); // "support#turn:4:model"
 */
export async function verifyTurnResults(journal: Journal, state: RunState, turn: number): Promise<string | undefined> {
  const loopId = state.loopId;
  if (loopId === undefined) return undefined;
  const frame = state.frames[modelFrameId(loopId, turn)];
  const next = state.frames[modelFrameId(loopId, turn + 1)];
  const response = responseAt(state, turn);
  if (!frame || !next || !response) return undefined;
  // A redacted model response or tool output is not what was fed: the prompt digest cannot vouch for it.
  if (frame.redacted || toolFramesOf(state, loopId, turn, response.toolCalls.length).some((f) => f?.redacted))
    return undefined;
  const added: Message[] = [assistantMessage(response)];
  let unmarked = false; // an envelope-shaped output without the runtime's mark (plain data)
  for (let index = 0; index < response.toolCalls.length; index++) {
    const stepId = toolStepId(loopId, turn, index);
    const fed = await fedFromState(state, stepId, (id, envelope) =>
      resolveClaimCheck(envelope, journal.blobs, `run ${state.runId} step ${id}`),
    );
    const frame = state.frames[stepId];
    if (frame && !frame.claimCheck && isClaimCheckEnvelope(frame.output)) unmarked = true;
    added.push(toolResultMessage(response.toolCalls[index] as ToolCall, fed));
  }
  const chained = chainedPromptDigest(frame.inputDigest, added);
  const context = state.decisions[contextDecisionId(loopId, turn + 1)]; // a context policy's prompt: its digest covers the decision
  if ((context === undefined ? chained : contextPromptDigest(chained, context.choice)) !== next.inputDigest) {
    const legacy = unmarked
      ? " (or, if the run was recorded by a Loom older than the claim-check mark, an envelope it wrote is now read as plain data: see the CHANGELOG)"
      : "";
    throw new IntegrityError(
      `run ${state.runId}: what was fed back after model call ${turn} no longer hashes to the prompt digest ${next.frameId} recorded; the journal was altered: restore it from a backup${legacy}`,
    );
  }
  return next.frameId;
}

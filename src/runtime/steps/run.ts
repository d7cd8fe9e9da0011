import { DefinitionChangedError } from "../../core/errors.ts";
import { originalsView } from "../../events/redaction/redactedOriginals.ts";
import { whyNotResumable } from "../../events/redaction/redactedResume.ts";
import type { Journal } from "../../events/spi.ts";
import type { ToolDescriptor } from "../../models/types.ts";
import { type DefinitionPin, definitionPin, describeChange, unacceptedChanges } from "../../policies/definition.ts";
import type { RunState } from "../../projections/runState.ts";
import type { ToolCallLogMode } from "../../projections/types.ts";
import type { AgentLoopConfig, Tool } from "../base/config.ts";
import { RedactedHistoryError } from "../base/errors.ts";
import type { SnapshotSchedule } from "../base/snapshots.ts";

/**
 * One run as `prepare` made it: what holds for the whole run once its journal is read, made in one
 * place and read-only after. What changes as the run goes (the conversation, the calls in flight,
 * the journal's fold) has owners of its own.
 */
export interface Run {
  /** How the run treats its record: a run of its own, or a replay of a recording. */
  readonly mode: RunMode;
  /** The tool-call log's shape, as pinned in the journal (or configured, for a new run). */
  readonly logMode: ToolCallLogMode;
  /** The run's deadline (ms since the epoch) as journaled, when the loop has `timeouts.runMs`. */
  readonly deadlineAt: number | undefined;
  /** The run's tools by name: the loop's, plus its tool sources' (toolSources.ts). */
  readonly tools: Readonly<Record<string, Tool>>;
  /** What the model is told it can call: the same list on every call of the run. */
  readonly toolDescriptors: readonly ToolDescriptor[];
  /** The turn the chart starts from: 0, or a compact resume's last recorded turn. */
  readonly startTurn: number;
  /** Writes the run's snapshots as it goes (`config.snapshots`); none for a replay. */
  readonly snapshots: SnapshotSchedule | undefined;
}

/**
 * How a run treats its record. Live, it is the run of this code: a resume judges every recorded
 * frame against it, refuses a journal recorded under another definition, keeps its own records
 * (snapshots, telemetry, a `run.failed`) and takes the shortcuts of a resume. A replay serves
 * every step from a recording without judging what this code would send, keeps nothing of its own,
 * and walks every turn through the chart, so that a watcher sees each step.
 *
 * @example
 * const mode = replayMode(() => nextClick()); // `loom inspect`: one model step per click
 */
export interface RunMode {
  readonly kind: "live" | "replay";
  /**
   * Where the run reads its own history: live, the journal with the originals of redacted payloads
   * restored where it keeps them (the model is fed what it was fed); a replay, the journal as it is.
   */
  history(journal: Journal): Journal;
  /** Refuses to go on with a recorded run this code may not resume (another definition, a redacted history). */
  checkResumable(runId: string, config: AgentLoopConfig, state: RunState, journal: Journal): Promise<void>;
  /** Whether model frames' prompt digests are judged against the conversation this code builds. */
  readonly judgesPrompts: boolean;
  /** Whether the run writes records of its own beside its steps: snapshots, telemetry, a `run.failed`. */
  readonly keepsRecords: boolean;
  /**
   * Whether a resume takes its shortcuts: starting at a compact state's last turn, and serving a
   * turn the journal settled whole without a child actor per call.
   */
  readonly resumesShort: boolean;
  /** Awaited before each model step (a replay watched step by step). */
  readonly pace: (() => Promise<unknown>) | undefined;
}

/** The mode of a run of this code: `loop.run`, `loop.stream`, a worker's run. */
export const LIVE: RunMode = Object.freeze({
  kind: "live",
  history: (journal: Journal) => originalsView(journal),
  async checkResumable(runId: string, config: AgentLoopConfig, state: RunState, journal: Journal): Promise<void> {
    checkDefinition(runId, config, state.definition);
    if (state.redacted) {
      const { seq, type } = state.redacted;
      throw new RedactedHistoryError(runId, seq, type, await whyNotResumable(journal, runId, seq));
    }
  },
  judgesPrompts: true,
  keepsRecords: true,
  resumesShort: true,
  pace: undefined,
} as const);

/**
 * The mode of a replay of a recording (`loom inspect`): every step served from the journal, neither
 * the prompt digests nor the loop's definition compared (a stand-in loop cannot reproduce them).
 * `pace` is awaited before each model step.
 *
 * @example
 * await replayRecording(config, { runId, journal: copy, pace: () => nextClick() }); // uses replayMode(pace)
 */
export function replayMode(pace?: () => Promise<unknown>): RunMode {
  return Object.freeze({
    kind: "replay",
    history: (journal: Journal) => journal,
    checkResumable: async () => {},
    judgesPrompts: false,
    keepsRecords: false,
    resumesShort: false,
    pace,
  } as const);
}

/**
 * Refuses to go on with a run recorded under another definition of the loop than this one, unless
 * the loop accepts every change (`acceptDefinitionChanges`). Runs recorded before the pin pass.
 */
function checkDefinition(runId: string, config: AgentLoopConfig, recorded: DefinitionPin | undefined): void {
  if (recorded === undefined) return;
  const changes = unacceptedChanges(recorded, definitionPin(config), config.acceptDefinitionChanges);
  if (changes.length === 0) return;
  const kinds = [...new Set(changes.map((c) => c.kind))].filter((k) => k !== "system-changed");
  const accepts =
    kinds.length === changes.length
      ? `acceptDefinitionChanges: [${kinds.map((k) => JSON.stringify(k)).join(", ")}] in the loop's configuration`
      : "a system prompt change cannot be accepted: every model call's prompt digest covers it";
  throw new DefinitionChangedError(runId, config.id, changes.map(describeChange), accepts);
}

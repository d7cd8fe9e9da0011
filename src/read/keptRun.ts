import { type Journal, readJournal } from "../index.ts";
import type { JournalEntry, RunState } from "../journal.ts";
import { runStateProjection } from "../projections/runState.ts";
import { activityOfFolded } from "../runtime/control/activity.ts";
import { entryBytes, type RunInfo, resumeRefusalOf, runInfoOfState } from "./runInfo.ts";
import { type RunView, runViewOf } from "./runView.ts";

/**
 * A run read once and kept: its folded state (its timeline, {@link RunView}, derived from it)
 * and the figures `runInfo` reads of its entries, each evolved with the entries appended since,
 * never re-read or re-folded from the start. What the viewer's live page keeps while it follows a run.
 *
 * @example
 * const kept = await KeptRun.read(journal, "r-1");
 * for await (const event of followRun(journal, "r-1", { after: kept.seq })) {
 *   if ("cursor" in event) await kept.catchUp(event.cursor); // reads only the entries after kept.seq
 * }
 */
export class KeptRun {
  private constructor(
    readonly runId: string,
    private journal: Journal,
    private state: RunState,
    private facts: { entries: number; bytes: number; startedAt: string | undefined; updatedAt: string | undefined },
    private first: JournalEntry | undefined,
  ) {}

  /** The run read from its first entry (undefined: the journal holds no such run). */
  static async read(journal: Journal, runId: string): Promise<KeptRun | undefined> {
    const kept = new KeptRun(
      runId,
      journal,
      runStateProjection.initial(),
      {
        entries: 0,
        bytes: 0,
        startedAt: undefined,
        updatedAt: undefined,
      },
      undefined,
    );
    kept.extend(await readJournal(journal, runId));
    return kept.facts.entries === 0 ? undefined : kept;
  }

  /** The timeline derived from the state at {@link seq}, kept until an entry moves the state on. */
  private derived: RunView | undefined;

  /** The seq of the last entry kept. */
  get seq(): number {
    return this.state.version;
  }

  /** The run's timeline as far as the entries kept tell. */
  get view(): RunView {
    if (this.derived?.seq !== this.state.version) this.derived = runViewOf(this.state);
    return this.derived;
  }

  /**
   * Reads the entries after the last one kept, up to `cursor` and beyond when there are more,
   * and evolves the state and the timeline with them. Nothing to read when `cursor` is not past
   * {@link seq}. A compaction among them (its entries removed before its marker) starts the
   * run over from a fresh read, as the state kept no longer fits the journal.
   */
  async catchUp(cursor: number): Promise<void> {
    if (cursor <= this.seq) return;
    const more = await readJournal(this.journal, this.runId, { from: this.seq + 1 });
    if (more.some((e) => e.type === "frames.archived")) {
      const fresh = await KeptRun.read(this.journal, this.runId);
      if (fresh)
        Object.assign(this, { state: fresh.state, derived: undefined, facts: fresh.facts, first: fresh.first });
      return;
    }
    this.extend(more);
  }

  /** What `loom runs` shows of the run: {@link runInfo} of the kept state, its activity asked of the store. */
  async info(): Promise<RunInfo> {
    const { activity } = await activityOfFolded(this.journal, this.runId, this.state, this.first);
    return runInfoOfState(
      this.runId,
      this.state,
      this.facts,
      activity,
      await resumeRefusalOf(this.journal, this.state),
    );
  }

  private extend(entries: readonly JournalEntry[]): void {
    for (const entry of entries) {
      this.state = runStateProjection.evolve(this.state, entry);
      this.first ??= entry;
      this.facts.entries++;
      this.facts.bytes += entryBytes(entry);
      this.facts.startedAt ??= entry.meta.at;
      this.facts.updatedAt = entry.meta.at;
    }
  }
}

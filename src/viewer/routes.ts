import type { AnyStateMachine } from "xstate";
import { runsBelowPrefix } from "../events/ids.ts";
import { diffJournaledRuns, type Journal, listPendingApprovals, readJournal } from "../index.ts";
import { type DiffMatchMode, isStepResolutionError, parseFrameId, runIdProblem } from "../journal.ts";
import type { ResumeCommand } from "../read/activity.ts";
import { KeptRun } from "../read/keptRun.ts";
import { callAt, type RunView } from "../read/runView.ts";
import { readSession } from "../read/session.ts";
import { showStep } from "../read/step.ts";
import { actionFrom, type PendingApproval, perform, type ViewerActions } from "./actions.ts";
import { chartSvg } from "./chart.ts";
import { diffPage } from "./diffPage.ts";
import { href } from "./html.ts";
import type { LivePart } from "./live.ts";
import { isLive, type RunPageInput, runPage, runPart } from "./runPage.ts";
import { runRows, runsPage } from "./runsPage.ts";
import { sessionPage } from "./sessionPage.ts";
import { confirmPage, problemPage, stepPage } from "./stepPage.ts";
import { buildTravel, buildTravelLog, extendTravel, logsFrom, type Travel, type TravelLog, viewAt } from "./travel.ts";
import { atPart, travelPage } from "./travelPage.ts";

/** Time-travel states kept for this many runs (the most recently viewed). */
const KEPT_TRAVELS = 4;

/** The viewer's pages, read from one journal: each method returns the HTML, or undefined for an unknown run. */
export class Pages {
  readonly journal: Journal;
  readonly actions: ViewerActions | undefined;
  /** The form token this server's pages embed in their forms (random per server start). */
  readonly token: string;
  private readonly machine: AnyStateMachine;
  private readonly source: string;
  private readonly travels = new Map<string, Travel>();
  /** Each kept travel's logs, read once (a travel extended is a new one: its logs are read again). */
  private readonly travelLogs = new WeakMap<Travel, Promise<TravelLog>>();
  private readonly resumeCommand: ResumeCommand | undefined;

  constructor(options: {
    journal: Journal;
    actions: ViewerActions | undefined;
    machine: AnyStateMachine;
    source: string;
    token: string;
    resumeCommand?: ResumeCommand;
  }) {
    this.resumeCommand = options.resumeCommand;
    this.journal = options.journal;
    this.token = options.token;
    this.actions = options.actions;
    this.machine = options.machine;
    this.source = options.source;
  }

  /** The runs page, filtered by status and, when `session` is given, to that session's runs. */
  async runs(status: string | undefined, session?: string): Promise<string> {
    return runsPage(await runRows(this.journal), status, this.source, this.resumeCommand, session);
  }

  /** The session page (its messages, answers and runs), or undefined when nothing was sent to that session. */
  async session(sessionId: string): Promise<string | undefined> {
    if (runIdProblem(sessionId) !== undefined) return undefined; // no session can have that id
    const view = await readSession(this.journal, sessionId);
    return view === undefined ? undefined : sessionPage(view, this.source, this.resumeCommand);
  }

  /**
   * The diff page of two runs of this journal, or a problem naming the run that is not in it.
   * `match` is `strict` unless one of the four modes is given.
   */
  async diff(runA: string, runB: string, match: string | null): Promise<{ status: number; page: string }> {
    for (const runId of [runA, runB]) {
      if (runIdProblem(runId) !== undefined || (await readJournal(this.journal, runId)).length === 0) {
        return { status: 404, page: problemPage("No such run", `no run ${runId} in this journal`, "/") };
      }
    }
    const modes: readonly DiffMatchMode[] = ["strict", "unordered", "subset", "superset"];
    const mode = modes.find((m) => m === match) ?? "strict";
    const diff = await diffJournaledRuns(
      { journal: this.journal, runId: runA },
      { journal: this.journal, runId: runB },
      { match: mode },
    );
    return { status: 200, page: diffPage(runA, runB, diff, this.source) };
  }

  /** The run page, or only its `#run` part (what the live feed sends as the run goes on). */
  async run(runId: string, partOnly: boolean): Promise<string | undefined> {
    if (runIdProblem(runId) !== undefined) return undefined; // no run can have that id
    const kept = await KeptRun.read(this.journal, runId);
    if (kept === undefined) return undefined;
    const input = await this.runInput(kept);
    return partOnly ? runPart(input).text : runPage(input);
  }

  /**
   * The live page's `#run` part, kept: the run read once, then at each `render(cursor)` (the
   * cursor of an entry `followRun` said was appended) evolved with the entries after the last
   * one kept and rendered, with no second read or fold of the run's journal. Undefined for an
   * unknown run.
   */
  async liveRun(runId: string): Promise<((cursor: number) => Promise<LivePart>) | undefined> {
    if (runIdProblem(runId) !== undefined) return undefined;
    const kept = await KeptRun.read(this.journal, runId);
    if (kept === undefined) return undefined;
    return async (cursor) => {
      await kept.catchUp(cursor);
      return { seq: kept.seq, live: isLive(kept.view), html: runPart(await this.runInput(kept)).text };
    };
  }

  private async runInput(kept: KeptRun): Promise<RunPageInput> {
    const runId = kept.runId;
    const subRuns = await this.subRuns(runId);
    return {
      view: kept.view,
      info: await kept.info(),
      pending: mayWait(kept.view, subRuns) ? await this.pending(runId) : [],
      actions: this.actions !== undefined,
      token: this.token,
      subRuns,
      ...(this.resumeCommand ? { resumeCommand: this.resumeCommand } : {}),
    };
  }

  /** The time-travel page at entry `at` (the last one when not a number), or only its `#at` part. */
  async travel(runId: string, at: number, partOnly: boolean): Promise<string | undefined> {
    const travel = await this.travelOf(runId);
    if (travel === undefined) return undefined;
    const last = travel.entries.length;
    const index = Number.isInteger(at) ? Math.min(Math.max(at, 0), last) : last;
    let log = this.travelLogs.get(travel);
    if (log === undefined) {
      log = buildTravelLog(this.journal, travel);
      this.travelLogs.set(travel, log);
      log.catch(() => this.travelLogs.delete(travel)); // a failed read is tried again next time
    }
    const logs = logsFrom(await log, index);
    if (partOnly) return atPart(travel, index, logs).text;
    return travelPage(travel, index, logs, chartSvg(this.machine, viewAt(travel, index).chart));
  }

  /** The step page, or a 404 page that says why the step cannot be shown. */
  async step(runId: string, stepId: string): Promise<{ status: number; page: string }> {
    try {
      return { status: 200, page: stepPage(await showStep(this.journal, stepId, runId)) };
    } catch (e) {
      if (!isStepResolutionError(e)) throw e;
      return { status: 404, page: problemPage("No such step", e.message, href("runs", runId)) };
    }
  }

  /**
   * A posted action: without `confirmed=yes`, the page that asks; with it, the action done and
   * the run (or, for a fork, the new run) to go to.
   */
  async act(runId: string, form: URLSearchParams): Promise<{ status: number; page?: string; redirect?: string }> {
    const actions = this.actions;
    if (!actions) return { status: 405, page: problemPage("Read only", "this viewer was started without actions") };
    const request = actionFrom(runId, form);
    if (form.get("confirmed") !== "yes") return { status: 200, page: confirmPage(request, form, this.token) };
    await perform(actions, this.journal, request);
    return { status: 303, redirect: href("runs", request.kind === "fork" ? request.newRunId : runId) };
  }

  private async entries(runId: string) {
    if (runIdProblem(runId) !== undefined) return undefined; // no run can have that id
    const entries = await readJournal(this.journal, runId);
    return entries.length === 0 ? undefined : entries;
  }

  /** The sub-agent runs of the run's calls (`<runId>/<stepId>`), by step id. */
  private async subRuns(runId: string): Promise<Map<string, string>> {
    const prefix = runsBelowPrefix(runId);
    const out = new Map<string, string>();
    for (const r of await this.journal.store.listRuns()) {
      const stepId = r.runId.startsWith(prefix) ? r.runId.slice(prefix.length) : "";
      if (parseFrameId(stepId)?.kind === "tool") out.set(stepId, r.runId);
    }
    return out;
  }

  /** The calls waiting for an approval (`listPendingApprovals`: a read, buttons or not). */
  private pending(runId: string): Promise<readonly PendingApproval[]> {
    return listPendingApprovals(this.journal, { runId });
  }

  /** The run's states, kept between requests and extended with the entries appended since. */
  private async travelOf(runId: string): Promise<Travel | undefined> {
    const kept = this.travels.get(runId);
    let travel: Travel | undefined;
    if (kept) {
      const last = kept.entries.at(-1)?.seq ?? 0;
      const more = await readJournal(this.journal, runId, { from: last + 1 });
      // A compaction removed entries before its marker: the states from before it no longer fit.
      travel = more.some((e) => e.type === "frames.archived")
        ? buildTravel(runId, await readJournal(this.journal, runId))
        : extendTravel(kept, more);
    } else {
      const entries = await this.entries(runId);
      if (entries === undefined) return undefined;
      travel = buildTravel(runId, entries);
    }
    this.travels.delete(runId);
    this.travels.set(runId, travel);
    for (const old of this.travels.keys()) if (this.travels.size > KEPT_TRAVELS) this.travels.delete(old);
    return travel;
  }
}

/**
 * Whether any call of the run may wait for an approval: the run stopped for one, or a call in
 * flight runs a sub-agent (whose waiting calls its parent's page lists too). Otherwise none
 * waits, and the journal is not read to list them.
 */
function mayWait(view: RunView, subRuns: ReadonlyMap<string, string>): boolean {
  if (view.interruption?.reason === "approval-pending") return true;
  for (const stepId of subRuns.keys()) {
    const call = callAt(view, stepId);
    if (call?.status !== "ok" && call?.status !== "error") return true;
  }
  return false;
}

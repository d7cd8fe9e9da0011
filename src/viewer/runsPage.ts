import type { Journal } from "../index.ts";
import { activityLabel, type ResumeCommand, statusLabel, stoppedOrNext } from "../read/activity.ts";
import { clip, int, kB } from "../read/format.ts";
import { type RunInfo, scheduleText } from "../read/runInfo.ts";
import { readRunRows } from "../read/runRow.ts";
import { inTreeOrder, type RunParent } from "../read/runsTree.ts";
import { sessionOfRun } from "../read/session.ts";
import { href, html, page, when } from "./html.ts";
import { rowsOfSession } from "./sessionPage.ts";

/** A row of the runs page: what `loom runs` shows (tokens included). */
export interface RunRow extends RunInfo {
  /** A call of the run waits for an approval no one gave yet (activity `waiting-for-approval`). */
  readonly waiting: boolean;
  /** For a sub-agent's run (`agentTool`): the parent run and its call that runs it. */
  readonly parent?: RunParent;
  /** How many sub-agents deep the run is: 0 for a top-level run. */
  readonly depth: number;
}

/**
 * The statuses the page filters by: a run's activity (`running` only while a live process owns
 * it), with every interruption under `interrupted`.
 */
export const STATUSES = ["running", "stalled", "not-started", "interrupted", "completed", "failed"] as const;

/** The filter a row falls under: its activity, or `interrupted` for an interrupted run no process resumes yet. */
const filterOf = (r: RunRow): string =>
  r.status === "interrupted" && r.activity !== "running" ? "interrupted" : r.activity;

/**
 * Every run of the journal, those waiting for an approval first, then the most recently active;
 * each sub-agent's run right under its parent's (`parent`, `depth`), in the same order among its
 * siblings.
 *
 * @example
 * const rows = await runRows(journal); // rows[0].waiting is true when any run waits for an approval
 */
export async function runRows(journal: Journal): Promise<RunRow[]> {
  // Each run from its latest snapshot and the entries after it (src/read/runRow.ts); a run id no store reads is left out.
  const read = await readRunRows(journal);
  const rows: Omit<RunRow, "depth">[] = read.rows.map((info) => ({
    ...info,
    waiting: info.activity === "waiting-for-approval",
  }));
  rows.sort(
    (a, b) =>
      Number(b.waiting) - Number(a.waiting) ||
      (b.updatedAt ?? "").localeCompare(a.updatedAt ?? "") ||
      a.runId.localeCompare(b.runId),
  );
  const parentOf = read.parentOf;
  return inTreeOrder(rows, parentOf).map(({ run, depth }) => {
    const parent = parentOf(run.runId);
    return { ...run, ...(parent ? { parent } : {}), depth };
  });
}

/**
 * The run cell: a sub-agent's run indented under its parent, named under it when the parent is not
 * shown; a run a schedule started says which schedule and tick.
 */
function runCell(r: RunRow, shown: ReadonlySet<string>) {
  const link = html`<a href="${href("runs", r.runId)}">${r.runId}</a>`;
  if (r.parent === undefined) {
    const session = sessionOfRun(r.runId);
    if (session !== undefined) {
      return html`<td>${link} <span class="dim session">message ${session.n} of session <a href="${href("sessions", session.sessionId)}">${session.sessionId}</a></span></td>`;
    }
    if (r.schedule === undefined) return html`<td>${link}</td>`;
    return html`<td>${link} <span class="dim scheduled" title="started by schedule ${r.schedule.scheduleId} at its tick ${r.schedule.tick}">${scheduleText(r)}</span></td>`;
  }
  const under = shown.has(r.parent.runId)
    ? ""
    : html` <span class="dim">sub-agent of <a href="${href("runs", r.parent.runId)}">${r.parent.runId}</a></span>`;
  return html`<td class="subrun depth-${Math.min(r.depth, 6)}" title="sub-agent run of ${r.parent.runId}, its call ${r.parent.stepId}"><span class="tree">└</span> ${link}${under}</td>`;
}

/** The runs page, filtered to `status` when given, and to one session's runs when `session` is. */
export function runsPage(
  all: readonly RunRow[],
  status: string | undefined,
  source: string,
  resumeCommand?: ResumeCommand,
  session?: string,
): string {
  const rows = session === undefined ? all : rowsOfSession(all, session);
  const shown = status ? rows.filter((r) => filterOf(r) === status) : rows;
  // The status links keep the session filter.
  const also = session === undefined ? "" : `&session=${encodeURIComponent(session)}`;
  const filter = html`<nav class="filter" aria-label="filter by status">
    <a href="${session === undefined ? "/" : `/?session=${encodeURIComponent(session)}`}" class="${status ? "" : "on"}">all <span class="n">${rows.length}</span></a>
    ${STATUSES.map(
      (s) =>
        html`<a href="/?status=${s}${also}" class="${status === s ? "on" : ""}">${activityLabel(s)} <span class="n">${rows.filter((r) => filterOf(r) === s).length}</span></a>`,
    )}
  </nav>`;
  const ofSession =
    session === undefined
      ? ""
      : html`<p class="sub">the runs of session <a href="${href("sessions", session)}">${session}</a> (its conversation) · <a href="/">all runs</a></p>`;
  const waiting = rows.filter((r) => r.waiting).length;
  const ids = new Set(shown.map((r) => r.runId));
  const body = html`<h1>Runs</h1>
<p class="sub">${source}${waiting > 0 ? html` · <strong>${waiting} waiting for approval</strong>` : ""}</p>
${ofSession}
${filter}
${
  shown.length === 0
    ? html`<p class="empty">no ${status ?? ""} runs</p>`
    : html`<table class="runs">
<thead><tr><th>run</th><th>loop</th><th>status</th><th>why it stopped</th><th class="num">turns</th><th class="num">tokens</th><th class="num">journal</th><th>last activity</th></tr></thead>
<tbody>
${shown.map(
  (
    r,
  ) => html`<tr class="${r.waiting ? "waiting" : ""}" data-run="${r.runId}"${r.parent ? html` data-parent="${r.parent.runId}"` : ""}>
${runCell(r, ids)}
<td>${r.loopId ?? "?"}</td>
<td><span class="status ${r.activity}">${statusLabel(r)}</span></td>
<td class="why">${clip(stoppedOrNext(r, resumeCommand), 120)}</td>
<td class="num">${int(r.iterations)}</td>
<td class="num">${r.tokens.input + r.tokens.output > 0 ? html`${int(r.tokens.input)} in · ${int(r.tokens.output)} out` : html`<span class="dim">not reported</span>`}</td>
<td class="num">${kB(r.bytes)}</td>
<td>${when(r.updatedAt)}</td>
</tr>`,
)}
</tbody></table>`
}`;
  return page("Runs", body);
}

import { type RunInfo, runInfo, stoppedText } from "../cli/db.ts";
import { clip, int, kB } from "../cli/format.ts";
import { type Journal, readJournal, runIdProblem } from "../index.ts";
import { href, html, page, when } from "./html.ts";

/** A row of the runs page: what `loom runs` shows (tokens included). */
export interface RunRow extends RunInfo {
  /** The run waits for an approval (`approval-pending`). */
  readonly waiting: boolean;
}

/** The statuses the page filters by. */
export const STATUSES = ["running", "interrupted", "completed", "failed"] as const;

/**
 * Every run of the journal, those waiting for an approval first, then the most recently active.
 *
 * @example
 * const rows = await runRows(journal); // rows[0].waiting is true when any run waits for an approval
 */
export async function runRows(journal: Journal): Promise<RunRow[]> {
  const rows: RunRow[] = [];
  for (const { runId } of await journal.store.listRuns()) {
    if (runIdProblem(runId) !== undefined) continue; // no store reads it (see `loom runs`)
    const entries = await readJournal(journal, runId);
    const info = runInfo(runId, entries);
    rows.push({ ...info, waiting: info.interrupted?.reason === "approval-pending" });
  }
  return rows.sort(
    (a, b) =>
      Number(b.waiting) - Number(a.waiting) ||
      (b.updatedAt ?? "").localeCompare(a.updatedAt ?? "") ||
      a.runId.localeCompare(b.runId),
  );
}

/** The runs page, filtered to `status` when given. */
export function runsPage(rows: readonly RunRow[], status: string | undefined, source: string): string {
  const shown = status ? rows.filter((r) => r.status === status) : rows;
  const filter = html`<nav class="filter" aria-label="filter by status">
    <a href="/" class="${status ? "" : "on"}">all <span class="n">${rows.length}</span></a>
    ${STATUSES.map(
      (s) =>
        html`<a href="/?status=${s}" class="${status === s ? "on" : ""}">${s} <span class="n">${rows.filter((r) => r.status === s).length}</span></a>`,
    )}
  </nav>`;
  const waiting = rows.filter((r) => r.waiting).length;
  const body = html`<h1>Runs</h1>
<p class="sub">${source}${waiting > 0 ? html` · <strong>${waiting} waiting for approval</strong>` : ""}</p>
${filter}
${
  shown.length === 0
    ? html`<p class="empty">no ${status ?? ""} runs</p>`
    : html`<table class="runs">
<thead><tr><th>run</th><th>loop</th><th>status</th><th>why it stopped</th><th class="num">turns</th><th class="num">tokens</th><th class="num">journal</th><th>last activity</th></tr></thead>
<tbody>
${shown.map(
  (r) => html`<tr class="${r.waiting ? "waiting" : ""}" data-run="${r.runId}">
<td><a href="${href("runs", r.runId)}">${r.runId}</a></td>
<td>${r.loopId ?? "?"}</td>
<td><span class="status ${r.status}">${r.waiting ? "waiting for approval" : r.status}</span></td>
<td class="why">${clip(stoppedText(r), 120)}</td>
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

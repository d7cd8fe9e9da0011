import type { AgentStep, LeanAgentStep } from "../index.ts";
import { parseFrameId } from "../journal.ts";
import { int } from "../read/format.ts";
import { turnAt } from "../read/runView.ts";
import { type Html, href, html, page, raw, when } from "./html.ts";
import { callRow, modelRow, timelineTable } from "./runPage.ts";
import { type LogsAt, type Travel, viewAt } from "./travel.ts";

/**
 * The time-travel page: a slider over the journal's entries; at each point the full and the lean
 * tool-call log side by side, as the fold rebuilds them there (every call completed by then: its
 * whole output in the full log, its digest in the lean one, as text the browser's find reaches),
 * and the statechart state the run was in, marked on the diagram. The page's script fetches `#at` for each point the slider
 * reaches (`/runs/<id>/travel/at/<i>`); without the script the form's Go button does it.
 */

/** The whole page at point `index` (0: before the first entry). */
export function travelPage(travel: Travel, index: number, logs: LogsAt, chart: string): string {
  const { runId } = travel;
  const last = travel.entries.length;
  const nav = html`<span class="crumbs"> / <a href="${href("runs", runId)}">${runId}</a> / time travel</span>`;
  const body = html`<h1>Time travel: <code>${runId}</code></h1>
<form class="slider" method="get" action="${href("runs", runId, "travel")}" data-base="${href("runs", runId, "travel", "at")}">
<label for="at">entry</label>
<input type="range" id="at" name="at" min="0" max="${last}" value="${index}" aria-label="point in the journal">
<output id="at-label" for="at">${index} / ${last}</output>
<noscript><button>Go</button></noscript>
</form>
${compactionNote(travel)}
<div class="travel">
<div class="chart-box" id="chart">${raw(chart)}</div>
<div id="at-part">${atPart(travel, index, logs)}</div>
</div>`;
  return page(`Time travel ${runId}`, body, { nav });
}

/** What changes with the slider: the entry, the run's state there and both logs. */
export function atPart(travel: Travel, index: number, logs: LogsAt): Html {
  const state = viewAt(travel, index);
  const entry = index > 0 ? travel.entries[index - 1] : undefined;
  const ended = new Set(
    entry?.type === "frame.completed"
      ? [entry.data.frameId]
      : entry?.type === "call.settled"
        ? [entry.data.stepId]
        : entry?.type === "decision.recorded"
          ? [entry.data.decisionId.replace(/:outcome$/, "")]
          : [],
  );
  const ids = logs.lean.map((s) => s.stepId);
  return html`<div class="at" data-index="${index}" data-chart="${state.chart}" data-seq="${entry?.seq ?? 0}">
<dl class="summary">
<dt>entry</dt><dd>${entry ? html`seq ${entry.seq}: <code>${entry.type}</code> ${entryLabel(entry)} <span class="dim">${when(entry.meta.at)}</span>` : "before the first entry"}</dd>
<dt>run</dt><dd><span class="status ${state.status}">${state.status}</span> · ${int(state.turnCount)} turns</dd>
<dt>statechart</dt><dd><code id="chart-state">${state.chart}</code></dd>
</dl>
${turnPart(travel, index)}
<div class="logs">
<section class="log full"><h2>full <span class="count" data-count="${logs.full.length}">${logs.full.length} entries</span></h2>${logList(logs.full, ids, ended, logs.claimChecked)}</section>
<section class="log lean"><h2>lean <span class="count" data-count="${logs.lean.length}">${logs.lean.length} entries</span></h2>${logList(logs.lean, ids, ended, new Map())}</section>
</div>
</div>`;
}

type Step = AgentStep | LeanAgentStep;

/**
 * Every entry, whole (a user searches the page for a value of an output); those the point's entry
 * ended are marked (`ids`: the lean log's step ids, in the same order). A claim-checked output is
 * followed by what its blob holds.
 */
function logList<S extends Step>(
  log: readonly S[],
  ids: readonly string[],
  ended: ReadonlySet<string>,
  claimChecked: LogsAt["claimChecked"],
): Html {
  if (log.length === 0) return html`<p class="empty">no tool call has ended yet</p>`;
  return html`<ol start="0" class="entries">${log.map((s, i) => {
    const stepId = ids[i] ?? "";
    return html`<li class="${ended.has(stepId) ? "fresh" : ""}">${raw(itemHtml(s, claimChecked.get(stepId)))}</li>`;
  })}</ol>`;
}

/**
 * An entry's text on the page, rendered once per entry object: time travel's logs are read once
 * (`logsFrom` hands out the same entries at every point), so a slider move renders no output again.
 */
const rendered = new WeakMap<object, string>();
function itemHtml(s: Step, blob: ReturnType<LogsAt["claimChecked"]["get"]>): string {
  const kept = rendered.get(s);
  if (kept !== undefined) return kept;
  const text = html`<pre>${JSON.stringify(s) ?? "undefined"}</pre>${
    blob === undefined
      ? ""
      : "problem" in blob
        ? html`<p class="problem">claim-checked output not read: ${blob.problem}</p>`
        : html`<p class="dim">claim-checked: the output the model was fed, from the blob store</p><pre class="resolved">${JSON.stringify(blob.output) ?? "undefined"}</pre>`
  }`.text;
  rendered.set(s, text);
  return text;
}

function entryLabel(entry: Travel["entries"][number]): string {
  switch (entry.type) {
    case "frame.started":
    case "frame.completed":
    case "attempt.failed":
      return entry.data.frameId;
    case "decision.recorded":
      return entry.data.decisionId;
    case "call.settled":
      return `${entry.data.stepId} (${entry.data.reason})`;
    case "run.interrupted":
      return entry.data.reason;
    default:
      return "";
  }
}

/** The turn the point's entry belongs to (the last one otherwise), as the run's state at that point has it. */
function turnPart(travel: Travel, index: number): Html | string {
  const state = viewAt(travel, index);
  const entry = travel.entries[index - 1];
  if (state.turnCount === 0) return "";
  const id =
    entry?.type === "frame.started" || entry?.type === "frame.completed" || entry?.type === "attempt.failed"
      ? entry.data.frameId
      : entry?.type === "call.settled"
        ? entry.data.stepId
        : entry?.type === "decision.recorded"
          ? entry.data.decisionId
          : "";
  const turn = turnAt(state, parseFrameId(id.replace(/:(outcome|approval)$/, ""))?.turn ?? state.turnCount - 1);
  if (!turn) return "";
  return html`<h2>Turn ${turn.turn} at this point</h2>${timelineTable([
    modelRow(turn, state, travel.runId),
    ...turn.calls.map((c) => callRow(c, state, travel.runId)),
  ])}`;
}

/** Compaction removed frames' entries: before its marker, the points miss those calls. */
function compactionNote(travel: Travel): Html | string {
  const markers = travel.entries.filter((e) => e.type === "frames.archived");
  if (markers.length === 0) return "";
  const frames = markers.reduce((n, e) => n + (e.type === "frames.archived" ? e.data.frameIds.length : 0), 0);
  return html`<p class="dim">Compaction moved ${int(frames)} frames to the archive (marker at seq ${markers.map((m) => m.seq).join(", ")}): their entries are no longer in the journal, so the points before the marker miss those calls; from the marker on, the logs have them again.</p>`;
}

import type { RunActivity, RunWait } from "../index.ts";
import { type ResumeCommand, statusLabel, stoppedOrNext } from "../read/activity.ts";
import { clip, int, kB } from "../read/format.ts";
import type { RunInfo } from "../read/runInfo.ts";
import { type CallView, type RunView, type TurnView, turnsOf } from "../read/runView.ts";
import { callStatus, endText, modelStatus, rerunText, runEnd, stepLabel, waitsOf } from "../read/timeline.ts";
import { FORM_TOKEN_FIELD, type PendingApproval } from "./actions.ts";
import { duration, type Html, href, html, jsonText, page, when } from "./html.ts";

/**
 * The run page: its summary, why it stopped, the calls waiting for an approval (with approve and
 * deny buttons when the viewer has the run-control API), cancel and fork, and the timeline of
 * its turns. `#run` holds everything that changes while the run goes on: the page's script
 * fetches it again (`?part=run`) when the live feed says the journal grew.
 */

export interface RunPageInput {
  readonly view: RunView;
  readonly info: RunInfo;
  /** The calls waiting for an approval (from the run-control API, or read from the interruption). */
  readonly pending: readonly PendingApproval[];
  /** Whether to show the buttons (the viewer was given the run-control API). */
  readonly actions: boolean;
  /** The server's form token, put in each form (see `FORM_TOKEN_FIELD`). */
  readonly token?: string;
  /** The sub-agent run (`agentTool`) of each call that has one, by the call's step id: linked under the call. */
  readonly subRuns?: ReadonlyMap<string, string>;
  /** How the page tells a user to resume a run (`loom view` names `loom resume` for the demo's). */
  readonly resumeCommand?: ResumeCommand;
}

/** The whole run page. */
export function runPage(input: RunPageInput): string {
  const { runId } = input.info;
  const nav = html`<span class="crumbs"> / <a href="${href("runs", runId)}">${runId}</a></span>`;
  return page(
    `Run ${runId}`,
    html`<div id="run" data-run="${runId}" data-seq="${input.view.seq}" data-live="${isLive(input.view) ? "1" : ""}">${runPart(input)}</div>`,
    { nav },
  );
}

/** A run that may still grow: anything but completed, failed or cancelled (an interrupted run can be resumed). */
export const isLive = (view: RunView): boolean =>
  view.status !== "completed" && view.status !== "failed" && view.status !== "cancelled";

/** What `#run` holds (the part the live feed refreshes). */
export function runPart({ view, info, pending, actions, subRuns, token, resumeCommand }: RunPageInput): Html {
  const runId = info.runId;
  const stopped = stoppedOrNext(info, resumeCommand);
  return html`<h1>Run <code>${runId}</code> <span class="status ${info.activity}">${statusLabel(info)}</span>${isLive(view) ? html` <span class="live" title="updates while the run goes on">● live</span>` : ""}</h1>
<dl class="summary">
<dt>loop</dt><dd>${info.loopId ?? "?"}</dd>
<dt>statechart</dt><dd><code>${view.chart}</code></dd>
<dt>turns</dt><dd>${int(info.iterations)} model calls</dd>
<dt>tokens</dt><dd>${view.tokens.reported ? `${int(view.tokens.input)} in · ${int(view.tokens.output)} out` : "not reported by the model"}</dd>
<dt>journal</dt><dd>${int(info.entries)} entries, ${kB(info.bytes)}, ${info.mode} log</dd>
<dt>started</dt><dd>${when(info.startedAt)}</dd>
<dt>last activity</dt><dd>${when(info.updatedAt)}</dd>
${stopped ? html`<dt>stopped</dt><dd class="why">${stopped}</dd>` : ""}
${view.error ? html`<dt>failed</dt><dd class="why">${view.error.name}: ${view.error.message}</dd>` : ""}
${view.answer !== undefined ? html`<dt>answer</dt><dd class="answer">${clip(view.answer, 400)}</dd>` : ""}
</dl>
<p class="links"><a href="${href("runs", runId, "travel")}">Time travel ⟷</a></p>
${pendingPart(runId, pending, actions, token)}
${waitsPart(waitsOf(view))}
${actions ? controlPart(view, runId, token) : ""}
<pre id="live-text" class="live-text" hidden></pre>
<h2>Timeline</h2>
${timeline(view, info, subRuns)}`;
}

function pendingPart(
  runId: string,
  pending: readonly PendingApproval[],
  actions: boolean,
  token: string | undefined,
): Html | string {
  if (pending.length === 0) return "";
  return html`<section class="pending"><h2>Waiting for approval</h2>
${pending.map(
  (p) => html`<div class="approval" data-step="${p.stepId}">
<p><strong>${p.toolName}</strong> <a href="${href("runs", p.runId, "steps", p.stepId)}"><code>${p.stepId}</code></a>${p.expiresAt ? html` · expires ${when(p.expiresAt)}` : ""}${p.runId === runId ? "" : html` · in sub-agent run <a href="${href("runs", p.runId)}"><code>${p.runId}</code></a>: answered there, then resume this run`}</p>
<pre>${jsonText(p.input, 2_000)}</pre>
${
  actions
    ? html`<form method="post" action="${href("runs", p.runId, "actions")}" class="buttons">
<input type="hidden" name="stepId" value="${p.stepId}">${tokenField(token)}
<button name="action" value="approve" class="approve">Approve</button>
<button name="action" value="deny" class="deny">Deny</button>
</form>`
    : ""
}
</div>`,
)}
</section>`;
}

/** The run's sleeps and event waits (the timeline's `waitsOf`): each call, what it waits for, until when, and how it ends. */
function waitsPart(waits: readonly RunWait[]): Html | string {
  if (waits.length === 0) return "";
  return html`<section class="waits"><h2>Waiting</h2>
${waits.map(
  (w) => html`<div class="wait" data-step="${w.stepId}">
<p><strong>${w.toolName}</strong> <code>${w.stepId}</code> · ${w.kind === "sleep" ? "a time" : "an event"}${w.what ? html` · ${w.what}` : ""}${w.until ? html` · until ${when(w.until)}` : ""}${w.expiresAt ? html` · times out ${when(w.expiresAt)}` : ""}</p>
<p class="how">${w.deliver}</p>
</div>`,
)}
</section>`;
}

/** The hidden field with the server's form token (none when the page is rendered without one). */
export function tokenField(token: string | undefined): Html | string {
  return token === undefined ? "" : html`<input type="hidden" name="${FORM_TOKEN_FIELD}" value="${token}">`;
}

function controlPart(view: RunView, runId: string, token: string | undefined): Html {
  const models = [...turnsOf(view)].filter((t) => t.model.status === "completed").map((t) => t.stepId);
  return html`<section class="control"><h2>Control</h2>
${
  isLive(view)
    ? html`<form method="post" action="${href("runs", runId, "actions")}" class="inline">
<input type="hidden" name="action" value="cancel">${tokenField(token)}
<input name="reason" placeholder="why (optional)" aria-label="reason">
<button class="cancel">Cancel run…</button>
</form>`
    : ""
}
${
  models.length > 0
    ? html`<form method="post" action="${href("runs", runId, "actions")}" class="inline">
<input type="hidden" name="action" value="fork">${tokenField(token)}
<label>fork at <select name="at">${models.map((id, i) => html`<option value="${id}" ${i === models.length - 1 ? "selected" : ""}>${id}</option>`)}</select></label>
<label>as <input name="newRunId" value="${runId}-fork" aria-label="new run id"></label>
<button>Fork…</button>
</form>`
    : ""
}
</section>`;
}

/** The timeline: a row per model call, one per tool call under it, then how the run ended. */
/** The timeline's table around `rows`. */
export const timelineTable = (rows: Html | Html[] | string): Html =>
  html`<table class="timeline">
<thead><tr><th>turn</th><th>step</th><th>status</th><th class="num">duration</th><th class="num">bytes</th><th>retries</th><th>detail</th></tr></thead>
<tbody>${rows}</tbody></table>`;

function timeline(view: RunView, info: RunInfo, subRuns?: ReadonlyMap<string, string>): Html {
  const { runId, activity, unresumable } = info;
  const rows: Html[] = [];
  for (const turn of turnsOf(view)) {
    rows.push(modelRow(turn, view, runId, activity));
    for (const call of turn.calls) rows.push(callRow(call, view, runId, subRuns?.get(call.stepId), activity));
  }
  // The timeline's last word, as `loom show` ends a run's story.
  const ended = runEnd(view);
  const end = ended ? html`<tr class="end ${ended.type}"><td colspan="7">${endText(ended, unresumable)}</td></tr>` : "";
  return timelineTable([...rows, html`${end}`]);
}

/** A model call's row of the timeline; `activity`: the run's, when known (a stalled run's call is not calling). */
export function modelRow(turn: TurnView, view: RunView, runId: string, activity?: RunActivity): Html {
  const m = turn.model;
  const status = modelStatus(turn, view, activity);
  const detail = [
    m.usage ? `${int(m.usage.inputTokens ?? 0)} in · ${int(m.usage.outputTokens ?? 0)} out tokens` : "",
    m.finishReason ? `finish: ${m.finishReason}` : "",
    m.content ? `“${clip(m.content, 120)}”` : "",
    m.archived ? "archived" : "",
  ].filter(Boolean);
  return html`<tr class="model" data-turn="${turn.turn}">
<td>${turn.turn}</td>
<td>${m.status === "completed" ? html`<a href="${href("runs", runId, "steps", turn.stepId)}">model call</a>` : "model call"}</td>
<td><span class="status ${status}">${stepLabel(status)}</span></td>
<td class="num">${duration(m.startedAt, m.endedAt)}</td>
<td class="num"></td>
<td>${retries(m.failures, m.lastError)}</td>
<td>${detail.join(" · ")}</td>
</tr>`;
}

/** A tool call's row of the timeline; `subRun`: the sub-agent run the call runs, linked; `activity` as for {@link modelRow}. */
export function callRow(call: CallView, view: RunView, runId: string, subRun?: string, activity?: RunActivity): Html {
  const status = callStatus(call, view, activity);
  const ended = call.status === "ok" || call.status === "error";
  const detail = [
    call.approval
      ? `${call.approval.approved ? "approved" : "declined"}${call.approval.by ? ` by ${call.approval.by}` : ""}${
          "editedInput" in call.approval
            ? ` with an edited input ${clip(JSON.stringify(call.approval.editedInput) ?? "", 100)}`
            : ""
        }${call.approval.scope ? ` for the rest of the ${call.approval.scope}` : ""}`
      : "",
    call.settled ? `settled: ${call.settled}` : "",
    call.archived ? "archived" : "",
    clip(JSON.stringify(call.input) ?? "", 100),
  ].filter(Boolean);
  return html`<tr class="call" data-step="${call.stepId}">
<td></td>
<td class="tool">↳ ${ended ? html`<a href="${href("runs", runId, "steps", call.stepId)}">${call.toolName}</a>` : call.toolName}</td>
<td><span class="status ${status}">${stepLabel(status)}</span></td>
<td class="num">${duration(call.startedAt, call.endedAt)}</td>
<td class="num">${call.bytes === undefined ? "" : int(call.bytes)}</td>
<td>${retries(call.failures, call.lastError)}</td>
<td>${call.reruns ? html`<span class="rerun" title="${rerunText(call.reruns)}">rerun</span> · ` : ""}${detail.join(" · ")}${subRun === undefined ? "" : html` · <a class="subrun" href="${href("runs", subRun)}">sub-agent run ↘</a>`}</td>
</tr>`;
}

function retries(
  failures: number,
  error: { name: string; message: string; status?: number } | undefined,
): Html | string {
  if (failures === 0) return "";
  const last = error ? `${error.name}${error.status ? ` ${error.status}` : ""}: ${error.message}` : "";
  return html`<span class="retries" title="${last}">${failures} failed attempt${failures === 1 ? "" : "s"}</span>`;
}

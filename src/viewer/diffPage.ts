import type { RunDiff } from "../index.ts";
import type { CallChange, DiffCall, DiffCallSide } from "../journal.ts";
import { href, html, page } from "./html.ts";

/**
 * The diff page (`/diff?a=<runA>&b=<runB>&match=<mode>`): two runs side by side, their tool calls
 * aligned over tool and input digest (`diffRuns`), each row one call of `a` beside the call of `b`
 * it became, marked by what changed; then the first divergence and the deltas. Everything from
 * the journal is escaped by `html`.
 */

const LABEL: Record<CallChange, string> = {
  same: "same",
  "input-changed": "input changed",
  added: "added",
  removed: "removed",
  reordered: "reordered",
  "status-changed": "status changed",
  "output-changed": "output changed",
};

const cell = (runId: string, side: DiffCallSide | undefined) =>
  side === undefined
    ? html`<td class="dim">—</td>`
    : html`<td><code>${side.toolName}</code> #${side.index}${side.status ? html` <span class="status ${side.status}">${side.status}</span>` : ""}${
        side.stepId ? html` · <a href="${href("runs", runId, "steps", side.stepId)}">output</a>` : ""
      }</td>`;

const patchText = (call: DiffCall): string =>
  (call.patch ?? [])
    .map((op) => `${op.op} ${op.path || "/"}${"value" in op ? ` ${JSON.stringify(op.value)}` : ""}`)
    .join("\n");

/**
 * The page comparing run `a` with run `b`.
 *
 * @example
 * const diff = await diffJournaledRuns({ journal, runId: "r-1" }, { journal, runId: "r-2" });
 * res.end(diffPage("r-1", "r-2", diff, "./loom.db"));
 */
export function diffPage(runA: string, runB: string, diff: RunDiff, source: string): string {
  const nav = html`<span class="crumbs"> / diff ${runA} → ${runB}</span>`;
  const verdict = diff.identical ? "identical" : diff.pass ? `passes ${diff.match}` : `differs (${diff.match})`;
  const d = diff.firstDivergence;
  const deltas = Object.entries(diff.deltas).filter(([, v]) => v !== undefined);
  const body = html`<h1>Diff of <a href="${href("runs", runA)}">${runA}</a> and <a href="${href("runs", runB)}">${runB}</a></h1>
<p class="sub">${source} · <span class="status ${diff.pass ? "ok" : "error"}">${verdict}</span></p>
${d ? html`<p class="divergence">First divergence: turn ${d.turn}${d.stepId ? html` (<code>${d.stepId}</code>)` : ""}: ${d.what}</p>` : ""}
<table class="diff">
<thead><tr><th>change</th><th>iter</th><th>${runA}</th><th>${runB}</th></tr></thead>
<tbody>
${diff.calls.map(
  (call) => html`<tr class="change ${call.change}" data-change="${call.change}">
<td>${LABEL[call.change]}${call.moved ? " (moved)" : ""}${call.patch ? html`<pre class="patch">${patchText(call)}</pre>` : ""}</td>
<td>${(call.b ?? call.a)?.iteration}</td>
${cell(runA, call.a)}
${cell(runB, call.b)}
</tr>`,
)}
</tbody>
</table>
<p class="deltas">${deltas.map(([name, v]) => html`<span>${name} ${v.a} → ${v.b}</span> `)}</p>
${diff.answer && !diff.answer.same ? html`<p class="said answer"><strong>${runA}</strong> ${diff.answer.a}</p><p class="said answer"><strong>${runB}</strong> ${diff.answer.b}</p>` : ""}`;
  return page(`Diff ${runA} → ${runB}`, body, { nav });
}

/**
 * The viewer's stylesheet and script, served by the viewer itself (`/assets/…`): no CDN, no web
 * font (the system's fonts), so the page works offline. The script is small and optional: the
 * pages are whole without it; it moves the time-travel slider without reloading and keeps a run
 * page live.
 */

export const CSS = `
:root { --fg: #1f2328; --dim: #656d76; --line: #d0d7de; --bg: #fff; --soft: #f6f8fa; --ok: #1a7f37; --err: #cf222e; --warn: #9a6700; --run: #0969da; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: var(--bg); }
code, pre, .digest { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 12.5px; }
header.top { padding: 10px 20px; border-bottom: 1px solid var(--line); background: var(--soft); }
header.top a { color: var(--fg); text-decoration: none; }
.brand { font-weight: 700; }
.crumbs { color: var(--dim); }
main { padding: 16px 20px 40px; }
h1 { font-size: 20px; margin: 4px 0 8px; }
h2 { font-size: 15px; margin: 20px 0 8px; }
a { color: var(--run); }
.sub, .dim, .empty { color: var(--dim); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; background: var(--soft); position: sticky; top: 0; }
.num { text-align: right; white-space: nowrap; }
tr.waiting { background: #fff8c5; }
td.subrun .tree { color: var(--dim); }
td.depth-1 { padding-left: 24px; } td.depth-2 { padding-left: 44px; } td.depth-3 { padding-left: 64px; }
td.depth-4 { padding-left: 84px; } td.depth-5 { padding-left: 104px; } td.depth-6 { padding-left: 124px; }
.status { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: 12px; border: 1px solid var(--line); white-space: nowrap; }
.status.completed, .status.ok { color: var(--ok); border-color: #4ac26b; }
.status.cancelled, .status.not-run, .status.new { color: var(--dim); border-color: #afb8c1; }
.status.failed, .status.error { color: var(--err); border-color: #ff8182; }
.status.interrupted, .status.awaiting-approval, .status.waiting-for-approval, .status.waiting, .status.stalled { color: var(--warn); border-color: #d4a72c; }
.status.running, .status.started, .status.asked, .status.calling, .status.backing-off, .status.answered, .status.not-started { color: var(--run); border-color: #54aeff; }
.why { color: var(--warn); }
ol.session { padding-left: 0; list-style: none; }
ol.session li { border-bottom: 1px solid var(--line); padding: 8px 0; }
ol.session .said { margin: 4px 0; white-space: pre-wrap; word-break: break-word; }
ol.session .meta { margin: 0; color: var(--dim); }
.filter { display: flex; gap: 6px; margin: 8px 0 12px; }
.filter a { padding: 3px 10px; border: 1px solid var(--line); border-radius: 14px; text-decoration: none; color: var(--fg); }
.filter a.on { background: var(--fg); color: var(--bg); }
.filter .n { color: var(--dim); }
dl.summary { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 8px 0; }
dl.summary dt { color: var(--dim); }
dl.summary dd { margin: 0; }
.live { color: var(--ok); font-size: 12px; font-weight: 400; }
.live.off { color: var(--dim); }
tr.model td { background: var(--soft); }
td.tool { padding-left: 22px; white-space: nowrap; }
table.timeline td:last-child, td.why { word-break: break-word; max-width: 640px; }
tr.end td { font-weight: 600; }
tr.end.completed td { color: var(--ok); }
tr.end.failed td { color: var(--err); }
tr.end.interrupted td { color: var(--warn); }
tr.end.cancelled td { color: var(--dim); }
.retries { color: var(--err); }
.rerun { color: var(--warn); font-weight: 600; }
section.pending, section.control { border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px 10px; margin: 12px 0; }
section.pending { border-color: #d4a72c; background: #fffbea; }
pre { background: var(--soft); border: 1px solid var(--line); border-radius: 6px; padding: 8px; overflow: auto; max-height: 420px; margin: 4px 0; }
pre.output { max-height: none; }
.live-text { white-space: pre-wrap; }
button { font: inherit; padding: 4px 12px; border-radius: 6px; border: 1px solid var(--line); background: var(--soft); cursor: pointer; }
button.approve, button.confirm.approve { background: var(--ok); color: #fff; border-color: var(--ok); }
button.deny, button.cancel, button.confirm.deny, button.confirm.cancel { background: var(--err); color: #fff; border-color: var(--err); }
form.inline { display: flex; gap: 8px; align-items: center; margin: 6px 0; flex-wrap: wrap; }
.buttons { display: flex; gap: 8px; align-items: center; }
.slider { display: flex; align-items: center; gap: 10px; margin: 8px 0 12px; }
.slider input[type=range] { flex: 1; }
.slider output { min-width: 90px; text-align: right; font-variant-numeric: tabular-nums; }
.chart-box { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; padding: 6px; margin-bottom: 12px; }
svg.chart text { font: 12px system-ui, sans-serif; fill: var(--fg); }
svg.chart text.title { font-weight: 600; }
svg.chart .state rect { fill: #fff; stroke: #8c959f; }
svg.chart .state.compound > rect, svg.chart .state.parallel > rect { fill: #f6f8fa; }
svg.chart .state.active > rect { stroke: #bf8700; stroke-width: 2; }
svg.chart .state.current > rect { fill: #ffd33d; stroke: #9a6700; stroke-width: 2.5; }
svg.chart .edge { fill: none; stroke: #8c959f; }
svg.chart marker path { fill: #8c959f; }
.logs { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 14px; }
ol.entries pre { white-space: pre-wrap; word-break: break-all; max-height: 160px; }
.log h2 .count { color: var(--dim); font-weight: 400; }
ol.entries { padding-left: 28px; margin: 0; }
ol.entries li.fresh pre { border-color: #bf8700; background: #fff8c5; }
.problem { color: var(--err); }
`;

export const SCRIPT = `"use strict";
(() => {
  // Time travel: fetch the point the slider reaches, mark its state on the chart.
  const slider = document.querySelector("form.slider input[type=range]");
  if (slider) {
    const form = slider.form;
    const label = document.getElementById("at-label");
    const at = document.getElementById("at-part");
    let timer = 0;
    let asked = 0;
    const mark = () => {
      const part = at.querySelector(".at");
      const state = part ? part.dataset.chart : "";
      document.querySelectorAll("svg.chart [data-state]").forEach((g) => {
        const path = g.dataset.state;
        g.classList.toggle("current", path === state);
        g.classList.toggle("active", path !== state && state.startsWith(path + "."));
      });
    };
    const go = () => {
      const i = slider.value;
      label.textContent = i + " / " + slider.max;
      const n = ++asked;
      fetch(form.dataset.base + "/" + i).then((r) => r.text()).then((text) => {
        if (n !== asked) return; // a later move answered first
        at.innerHTML = text;
        mark();
        history.replaceState(null, "", "?at=" + i);
      }, () => { label.textContent = i + " / " + slider.max + " (the viewer did not answer)"; });
    };
    slider.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(go, 40); });
    form.addEventListener("submit", (e) => { e.preventDefault(); go(); });
  }
  // Live run page: #run as the server keeps it (a "run" event per burst of entries), and the text the model streams.
  const run = document.getElementById("run");
  if (run && run.dataset.live === "1" && window.EventSource) {
    const source = new EventSource(location.pathname + "/live?after=" + run.dataset.seq);
    source.addEventListener("run", (m) => {
      const part = JSON.parse(m.data);
      run.innerHTML = part.html;
      run.dataset.seq = String(part.seq);
      run.dataset.live = part.live ? "1" : "";
    });
    source.onmessage = (m) => {
      const event = JSON.parse(m.data);
      if (event.type !== "text-delta") return;
      const box = document.getElementById("live-text");
      if (box) { box.hidden = false; box.textContent += event.delta; }
    };
    source.addEventListener("end", () => source.close());
  }
})();
`;

import { type ResumeCommand, statusLabel, stoppedOrNext } from "../read/activity.ts";
import { int } from "../read/format.ts";
import { programSessionResume, type SessionView, sessionOfRun } from "../read/session.ts";
import { href, html, page } from "./html.ts";

/**
 * The session page (`/sessions/<sessionId>`): the conversation of a session (`loop.send`), each
 * message the user's text, the answer once its run completed, and its run with its status, as the
 * runs page says it. Everything from the journal is escaped by `html`.
 */

/**
 * The session page.
 *
 * @example
 * const view = await readSession(journal, "chat-1");
 * if (view) res.end(sessionPage(view, "./loom.db"));
 */
export function sessionPage(view: SessionView, source: string, resumeCommand?: ResumeCommand): string {
  const { sessionId, messages } = view;
  const last = messages.at(-1);
  const ended = last === undefined || ["completed", "cancelled", "failed"].includes(last.info.status);
  const resumable = !ended && last?.info.activity !== "running";
  const nav = html`<span class="crumbs"> / session ${sessionId}</span>`;
  const body = html`<h1>Session ${sessionId}</h1>
<p class="sub">${source} · ${int(messages.length)} ${messages.length === 1 ? "message" : "messages"} · <a href="/?session=${encodeURIComponent(sessionId)}">its runs</a></p>
${
  resumable && last
    ? html`<p class="resume">Its last message's run, <a href="${href("runs", last.runId)}">${last.runId}</a>, is ${statusLabel(last.info)}: resume the session with <code>${programSessionResume(sessionId)(last.runId, last.info.loopId)}</code></p>`
    : ""
}
<ol class="session">
${messages.map(
  (m) => html`<li data-run="${m.runId}">
<p class="meta">message ${m.n} · <a href="${href("runs", m.runId)}">${m.runId}</a> · <span class="status ${m.info.activity}">${statusLabel(m.info)}</span> · ${int(m.info.iterations)} model ${m.info.iterations === 1 ? "call" : "calls"}${
    stoppedOrNext(m.info, resumeCommand)
      ? html` · <span class="why">${stoppedOrNext(m.info, resumeCommand)}</span>`
      : ""
  }</p>
<p class="said user"><strong>user</strong> ${m.text ?? html`<span class="dim">no text</span>`}</p>
${m.answer === undefined ? "" : html`<p class="said answer"><strong>answer</strong> ${m.answer}</p>`}
</li>`,
)}
</ol>`;
  return page(`Session ${sessionId}`, body, { nav });
}

/**
 * The rows of one session, for the runs page filtered by `?session=`: its messages' runs (top-level
 * runs `<sessionId>/<n>`) and the sub-agents' runs under them, in the order given (tree order).
 */
export function rowsOfSession<T extends { readonly runId: string; readonly depth: number }>(
  rows: readonly T[],
  sessionId: string,
): T[] {
  let inSession = false;
  return rows.filter((r) => {
    if (r.depth === 0) inSession = sessionOfRun(r.runId)?.sessionId === sessionId;
    return inSession;
  });
}

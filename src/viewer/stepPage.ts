import { int } from "../read/format.ts";
import type { ShownStep } from "../read/step.ts";
import { type ActionRequest, confirmationText, FORM_TOKEN_FIELD } from "./actions.ts";
import { type Html, href, html, jsonText, page } from "./html.ts";
import { tokenField } from "./runPage.ts";

/** The step page: a step's output resolved and verified, as `loom show <stepId>` prints it. */
export function stepPage(step: ShownStep): string {
  const what = step.kind === "model" ? "the model's response" : `tool ${step.toolName ?? "?"}`;
  const nav = html`<span class="crumbs"> / <a href="${href("runs", step.runId)}">${step.runId}</a> / ${step.stepId}</span>`;
  const body = html`<h1>Step <code>${step.stepId}</code></h1>
<dl class="summary">
<dt>run</dt><dd><a href="${href("runs", step.runId)}">${step.runId}</a></dd>
<dt>what</dt><dd>${what} (iteration ${step.iteration ?? "?"})</dd>
<dt>status</dt><dd><span class="status ${step.status}">${step.status}</span>, read from the ${step.source}</dd>
<dt>digest</dt><dd><code class="digest">${step.digest ?? "null"}</code> (${int(step.bytes)} bytes)</dd>
<dt>verified</dt><dd class="verified">${
    step.verified.length > 0
      ? html`<ul>${step.verified.map((v) => html`<li>✓ ${v}</li>`)}</ul>`
      : step.redacted
        ? "not verified: the output is redacted, and the digests cover the original"
        : "not verified: nothing else records it yet (the run stopped before its next model call)"
  }</dd>
${
  step.redacted
    ? html`<dt>redacted</dt><dd class="redacted">${[...step.redacted.paths, ...(step.redacted.fn ? ["by the redaction function"] : [])].join(", ")}: the digest above is the original's (the lean log's); whoever holds the original checks it with <code>verifyRedacted(original, entry)</code></dd>`
    : ""
}
${step.claimCheck ? html`<dt>claim-check</dt><dd><pre>${jsonText(step.claimCheck)}</pre></dd>` : ""}
</dl>
<h2>Output</h2>
<pre class="output">${jsonText(step.output, 200_000)}</pre>`;
  return page(`Step ${step.stepId}`, body, { nav });
}

/** A page that says what went wrong (an unknown run or step, a bad form), with the status it is sent with. */
export function problemPage(title: string, message: string, back?: string): string {
  return page(
    title,
    html`<h1>${title}</h1><p class="problem">${message}</p>${back ? html`<p><a href="${back}">back</a></p>` : ""}`,
  );
}

/**
 * Asks before an action runs: the same form again, with `confirmed=yes` and the server's form
 * `token` (in place of any the form sent), or back to the run.
 */
export function confirmPage(request: ActionRequest, form: URLSearchParams, token?: string): string {
  const fields: (Html | string)[] = [];
  for (const [name, value] of form) {
    if (name !== "confirmed" && name !== FORM_TOKEN_FIELD)
      fields.push(html`<input type="hidden" name="${name}" value="${value}">`);
  }
  fields.push(tokenField(token));
  const body = html`<h1>Confirm</h1>
<p class="confirm">${confirmationText(request)}</p>
<form method="post" action="${href("runs", request.runId, "actions")}" class="buttons">
${fields}
<input type="hidden" name="confirmed" value="yes">
<button class="confirm ${request.kind}">Yes, ${request.kind}</button>
<a href="${href("runs", request.runId)}">No, back to the run</a>
</form>`;
  return page("Confirm", body);
}

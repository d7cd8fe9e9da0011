/**
 * HTML written by hand, escaped by default: every value put in a template by {@link html} is
 * escaped unless it is {@link Html} made by `html` itself (or {@link raw}). Run ids, tool names,
 * inputs and outputs come from the journal and from models: none of them can add markup.
 */

/** Markup that is safe to insert as it is. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text made safe for an HTML body or a quoted attribute. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);

/** Markup trusted as it is (the chart's SVG, written by this module's callers). */
export const raw = (text: string): Html => new Html(text);

/** Escapes one interpolated value: Html as is, arrays joined, nothing for null, undefined and false. */
function part(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(part).join("");
  if (value === undefined || value === null || value === false) return "";
  return escapeHtml(String(value));
}

/**
 * A template literal tag: the literal parts as written, every value escaped.
 *
 * @example
 * html`<td>${toolName}</td>`; // a tool named "<b>" shows as &lt;b&gt;
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? "";
  for (let i = 0; i < values.length; i++) out += part(values[i]) + (strings[i + 1] ?? "");
  return new Html(out);
}

/** A path of the viewer, each segment URL-encoded (run ids may hold `/`, step ids hold `#`). */
export const href = (...segments: readonly (string | number)[]): string =>
  `/${segments.map((s) => encodeURIComponent(String(s))).join("/")}`;

/** JSON for a `<pre>`: indented, clipped to `max` characters with a note of how much was left out. */
export function jsonText(value: unknown, max = 4_000): string {
  let text: string;
  try {
    text = JSON.stringify(value, null, 2) ?? "undefined";
  } catch {
    text = String(value);
  }
  return text.length <= max
    ? text
    : `${text.slice(0, max)}\n… (${(text.length - max).toLocaleString("en-US")} more characters)`;
}

/** Milliseconds between two ISO times, as `12 ms` or `1.4 s`; "" when either is missing. */
export function duration(from: string | undefined, to: string | undefined): string {
  if (from === undefined || to === undefined) return "";
  const ms = Date.parse(to) - Date.parse(from);
  if (!Number.isFinite(ms)) return "";
  return ms < 1_000 ? `${ms} ms` : `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

/** An ISO time as `2026-12-03 12:01:49`. */
export const when = (iso: string | undefined): string => (iso ?? "").replace("T", " ").slice(0, 19);

/** The whole page: the viewer's own stylesheet and script, nothing from elsewhere. */
export function page(title: string, body: Html, options: { readonly nav?: Html } = {}): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · loom view</title>
<link rel="stylesheet" href="/assets/viewer.css">
<script src="/assets/viewer.js" defer></script>
</head>
<body>
<header class="top"><a class="brand" href="/">loom view</a>${options.nav ?? ""}</header>
<main>${body}</main>
</body>
</html>
`.text;
}

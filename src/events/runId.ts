import { AgentLoopConfigError } from "../core/errors.ts";

/**
 * What a run id may be, written once: every store (append, read, compact), `loop.run` and
 * `submitRun` refuse any other id before touching the journal.
 *
 * A run id is a string of 1 to {@link MAX_RUN_ID_BYTES} UTF-8 bytes, of well-formed Unicode
 * (no lone surrogate), with no control character (Unicode category Cc: U+0000–U+001F,
 * U+007F–U+009F). Why: a lone surrogate has no UTF-8 form, so PostgreSQL (and any store that
 * encodes to UTF-8) replaces it with U+FFFD and two distinct ids become one run; NUL is refused
 * by PostgreSQL but kept by SQLite; other controls make ids that print as something else in a
 * terminal or a log line. The byte limit keeps ids inside every store's index key limits.
 */

/** The most UTF-8 bytes a run id may take. */
export const MAX_RUN_ID_BYTES = 512;

// In a `u` regex a surrogate pair is one code point, so \p{Cs} matches lone surrogates only.
const FORBIDDEN = /[\p{Cc}\p{Cs}]/u;

/** The rule, as error messages state it. */
export const RUN_ID_RULE = `a run id is 1 to ${MAX_RUN_ID_BYTES} UTF-8 bytes of well-formed Unicode with no control characters (U+0000–U+001F, U+007F–U+009F)`;

/**
 * Why `runId` is not a valid run id, or undefined when it is.
 *
 * @example
 * runIdProblem("order-42"); // undefined
 * runIdProblem("a\u0000b"); // "it holds the control character U+0000 at index 1"
 */
export function runIdProblem(runId: unknown): string | undefined {
  if (typeof runId !== "string") return `it is ${runId === null ? "null" : `a ${typeof runId}`}, not a string`;
  if (runId.length === 0) return "it is empty";
  // Each UTF-16 unit takes at most 3 UTF-8 bytes: short ids need no count.
  if (runId.length * 3 > MAX_RUN_ID_BYTES) {
    const bytes = Buffer.byteLength(runId, "utf8");
    if (bytes > MAX_RUN_ID_BYTES) return `it takes ${bytes} UTF-8 bytes`;
  }
  const bad = FORBIDDEN.exec(runId);
  if (bad === null) return undefined;
  const unit = `U+${bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
  return /\p{Cs}/u.test(bad[0])
    ? `it holds a lone surrogate (${unit} at index ${bad.index}), which is not well-formed Unicode`
    : `it holds the control character ${unit} at index ${bad.index}`;
}

/**
 * Throws `AgentLoopConfigError` (code `invalidRunId`) unless `runId` is a valid run id (see
 * {@link runIdProblem}). The message shows the id escaped, says what is wrong and states the rule.
 * `where` names the call that was refused (`append`, `loop.run`…).
 *
 * @example
 * checkRunId(request.runId, "loop.run"); // throws for "a\ud800", "", "x\n"
 */
export function checkRunId(runId: unknown, where: string): asserts runId is string {
  const problem = runIdProblem(runId);
  if (problem === undefined) return;
  throw new AgentLoopConfigError(
    `${where}: ${escapeRunId(runId)} is not a valid run id: ${problem}; ${RUN_ID_RULE}. Choose another id.`,
    "invalidRunId",
  );
}

/**
 * A run id (or any value given as one) as a quoted, printable string: control characters and
 * lone surrogates escaped as `\uXXXX`, ids longer than 80 characters cut with a count.
 *
 * @example
 * escapeRunId("a\u0000b"); // "\"a\\u0000b\""
 */
export function escapeRunId(runId: unknown): string {
  if (typeof runId !== "string") return String(runId);
  const shown = runId.length > 80 ? runId.slice(0, 80) : runId;
  // JSON.stringify escapes C0 controls, quotes and lone surrogates; C1 controls it leaves as they are.
  const quoted = JSON.stringify(shown).replace(
    /[\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  return runId.length > 80 ? `${quoted}… (${runId.length} characters)` : quoted;
}

/** Why a tool call's input is refused before its tool runs (the model is told, as an `invalid-input` result). */
import { canonicalJson, MAX_CANONICAL_DEPTH } from "../../core/canonicalJson.ts";
import { isCanonicalJsonError } from "../../core/errors.ts";

/** The marker an adapter puts in place of a tool-call input that was not valid JSON. */
export const invalidInputMessage = (input: unknown): string | undefined => {
  if (typeof input !== "object" || input === null || !("__loomInvalidInput" in input)) return undefined;
  const error = (input as { error?: unknown }).error;
  return `the tool-call input is not valid JSON${typeof error === "string" ? ` (${error})` : ""}`;
};

/**
 * Why an input has no canonical JSON form (a lone surrogate, nesting past the canonicalizer's
 * cap), or undefined when it has one. Such an input has no digest for its frame to record and a
 * resume to compare, so it is refused before the tool runs, and the model is told why.
 */
export const noCanonicalForm = (input: unknown): string | undefined => {
  try {
    canonicalJson(input);
    return undefined;
  } catch (e) {
    if (!isCanonicalJsonError(e)) return "the tool-call input has no canonical JSON form; send plain JSON";
    const why =
      e.code === "lone-surrogate"
        ? "a string holds a lone UTF-16 surrogate"
        : e.code === "too-deep"
          ? `it nests deeper than ${MAX_CANONICAL_DEPTH} levels`
          : `${e.code}`;
    return `the tool-call input has no canonical JSON form (${why}); send well-formed, less deeply nested JSON`;
  }
};

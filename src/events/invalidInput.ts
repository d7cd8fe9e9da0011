/**
 * The invalid-input marker: what a model adapter journals in place of a tool call's input whose
 * JSON text did not parse (in a `ModelResponse`'s tool calls). The runtime settles such a call as
 * `invalid-input`; readers show the raw text.
 */

/**
 * The input of a tool call whose JSON text did not parse. The call is kept (never a crash) so
 * the loop can settle it as `invalid-input` and feed `error` back to the model.
 */
export interface InvalidToolInput {
  /** The raw text the model produced. */
  readonly __loomInvalidInput: string;
  /** Why it is not JSON. */
  readonly error: string;
}

/**
 * Tells whether a tool call's input is the marker for malformed JSON text.
 *
 * @example
 * ```ts
 * if (isInvalidToolInput(call.input)) settle(call, `invalid JSON: ${call.input.error}`);
 * ```
 */
export function isInvalidToolInput(input: unknown): input is InvalidToolInput {
  return (
    typeof input === "object" &&
    input !== null &&
    typeof (input as { __loomInvalidInput?: unknown }).__loomInvalidInput === "string"
  );
}

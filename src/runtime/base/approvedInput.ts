/**
 * Edit and approve: a person approves a call with another input than the model's. The input is
 * checked as the tool would check the model's (a JSON form with a digest, then its
 * `validateInput`) before anything is journaled; the decision then keeps both digests and the
 * call runs with the approved input.
 */
import { digestOfRecorded } from "../../core/digest.ts";
import { jsonRoundTrip } from "../../core/jsonForm.ts";
import type { Tool } from "./config.ts";
import { ApprovalInputError } from "./errors.ts";

/** An approved input that passed its tool's checks: as journaled, as the tool runs with it, and its digest. */
export interface CheckedInput {
  /** Its JSON form: what the decision journals. */
  readonly recorded: unknown;
  /** What the tool runs with: `validateInput`'s value (possibly transformed), else `recorded`. */
  readonly value: unknown;
  /** sha256 hex of its canonical JSON: the frame's input digest. */
  readonly inputDigest: string;
}

/**
 * Checks an input approved in place of the model's against the call's tool; throws
 * {@link ApprovalInputError} (nothing journaled) when the tool would refuse it.
 *
 * @example
 * const checked = await checkApprovedInput({ runId, stepId, toolName: "refund" }, refund, { order: "A-17", euros: 30 });
 * checked.inputDigest; // the digest the call's frame records
 */
export async function checkApprovedInput(
  call: { readonly runId: string; readonly stepId: string; readonly toolName: string },
  tool: Pick<Tool, "validateInput"> | undefined,
  input: unknown,
): Promise<CheckedInput> {
  const refuse = (why: string) => new ApprovalInputError(call.runId, call.stepId, call.toolName, why);
  let recorded: unknown;
  try {
    recorded = jsonRoundTrip(input);
  } catch (e) {
    throw refuse(`it has no JSON form: ${(e as Error).message}`);
  }
  const { digest } = digestOfRecorded(recorded);
  if (recorded === undefined || digest === null) throw refuse("it has no canonical JSON form");
  if (tool?.validateInput === undefined) return { recorded, value: recorded, inputDigest: digest };
  const check = await tool.validateInput(recorded);
  if (!check.ok) throw refuse(check.message);
  return { recorded, value: check.value, inputDigest: digest };
}

import { LoomError } from "../core/errors.ts";
import type { GenerateRequest, Message, Model, ModelResponse } from "./types.ts";

/** What a scripted model's function is given: the conversation so far and the call's index. */
export interface ScriptContext {
  readonly messages: readonly Message[];
  /** How many times this model object has been called before (not the run's turn on a resume). */
  readonly call: number;
  /** The model turn: the number of assistant messages in the conversation so far. */
  readonly turn: number;
  readonly request: GenerateRequest;
}

/**
 * What `scriptedModel` answers with: the responses in order (one per model call), or a function
 * that computes each from the call (its turn and request).
 */
export type Script = readonly ModelResponse[] | ((context: ScriptContext) => ModelResponse | Promise<ModelResponse>);

/** A scripted model ran out of responses. */
export class ScriptExhaustedError extends LoomError {
  constructor(turn: number, length: number) {
    super(
      "scriptExhausted",
      `scriptedModel: turn ${turn} asked for a response but the script has ${length}; add responses or end with one that has no tool calls`,
    );
  }
}

/**
 * A deterministic model for tests and the demo: a list of responses (picked by the model turn,
 * so a resumed run gets the same answer for the same turn), or a function of the conversation.
 * `calls` counts the times it was actually called.
 *
 * @example
 * const model = scriptedModel([
 *   { toolCalls: [{ id: "c1", name: "add", input: { a: 1, b: 2 } }] },
 *   { content: "3", toolCalls: [] },
 * ]);
 */
export function scriptedModel(script: Script): Model & { readonly calls: number } {
  let calls = 0;
  return {
    get calls() {
      return calls;
    },
    async generate(request) {
      const turn = request.messages.filter((m) => m.role === "assistant").length;
      const call = calls++;
      if (typeof script === "function") return script({ messages: request.messages, call, turn, request });
      const response = script[turn];
      if (!response) throw new ScriptExhaustedError(turn, script.length);
      return response;
    },
  };
}

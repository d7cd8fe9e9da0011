import { LoomError } from "../core/errors.ts";
import type { GenerateRequest, Message, Model, ModelResponse, ModelStreamPart } from "./types.ts";

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
 * One scripted answer: a model response whose `toolCalls` may be left out for a text answer
 * (`{ content: "Done." }` is `{ content: "Done.", toolCalls: [] }`).
 */
export type ScriptedResponse = Omit<ModelResponse, "toolCalls"> & { readonly toolCalls?: ModelResponse["toolCalls"] };

/**
 * What `scriptedModel` answers with: the responses in order (one per model call), or a function
 * that computes each from the call (its turn and request).
 */
export type Script =
  | readonly ScriptedResponse[]
  | ((context: ScriptContext) => ScriptedResponse | Promise<ScriptedResponse>);

/** The response as the Model SPI gives it: a text answer's missing `toolCalls` is `[]`. */
const asResponse = (r: ScriptedResponse): ModelResponse =>
  r.toolCalls === undefined ? ({ ...r, toolCalls: [] } as ModelResponse) : (r as ModelResponse);

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
 * How a scripted model streams (`Model.stream`).
 *
 * @example
 * const typing = scriptedModel([{ content: "Hello there", toolCalls: [] }], { deltaDelayMs: 40 });
 */
export interface ScriptedModelOptions {
  /** `false`: the model has no `stream`, only `generate`. Default: it streams. */
  readonly stream?: boolean;
  /** A pause before each delta, in ms (the demo uses it to look like a model typing). Default 0. */
  readonly deltaDelayMs?: number;
}

/**
 * A deterministic model for tests and the demo: a list of responses (picked by the model turn,
 * so a resumed run gets the same answer for the same turn), or a function of the conversation.
 * `calls` counts the times it was actually called, streamed or not. The turn is counted as the
 * conversation grows: a messages array it was sent before (a run sends one, grown each turn) has
 * only its new messages counted; an array that shrank, or whose last counted message is no longer
 * where it was, is counted again from its start.
 *
 * It streams too (`stream`): the content in word deltas, each tool call's input as JSON text in
 * two deltas, then the same response `generate` gives.
 *
 * @example
 * const model = scriptedModel([
 *   { toolCalls: [{ id: "c1", name: "add", input: { a: 1, b: 2 } }] },
 *   { content: "3" }, // a text answer: no toolCalls needed
 * ]);
 * for await (const part of model.stream!(request)) console.log(part); // word deltas, then the response
 */
export function scriptedModel(script: Script, options: ScriptedModelOptions = {}): Model & { readonly calls: number } {
  let calls = 0;
  const counts = new WeakMap<readonly Message[], Counted>();
  const respond = async (request: GenerateRequest): Promise<ModelResponse> => {
    const turn = assistantTurns(request.messages, counts);
    const call = calls++;
    if (typeof script === "function")
      return asResponse(await script({ messages: request.messages, call, turn, request }));
    const response = script[turn];
    if (!response) throw new ScriptExhaustedError(turn, script.length);
    return asResponse(response);
  };
  const delayMs = options.deltaDelayMs ?? 0;
  function stream(request: GenerateRequest): AsyncIterableIterator<ModelStreamPart> {
    return delayMs > 0 ? pacedStream(request) : new InstantStream(respond, request);
  }
  async function* pacedStream(request: GenerateRequest): AsyncGenerator<ModelStreamPart> {
    const response = await respond(request);
    for (const part of scriptedDeltas(response)) {
      // Only a paced stream waits, so only it reads the signal (a run's step makes it when read).
      if (delayMs > 0) {
        await pause(delayMs, request.signal);
        request.signal.throwIfAborted();
      }
      yield part;
    }
    yield { type: "response", response };
  }
  return {
    get calls() {
      return calls;
    },
    generate: respond,
    ...(options.stream === false ? {} : { stream }),
  };
}

/**
 * An unpaced scripted stream: the same parts as the paced one's generator, each `next` answered
 * as soon as the response is made (an async generator made a call cost some fourteen promises,
 * this about six). Like a generator, it asks the script at the first `next`, and ends after its
 * `response` part, a throw, or `return`.
 */
class InstantStream implements AsyncIterableIterator<ModelStreamPart> {
  private parts: ModelStreamPart[] | undefined;
  private ready: Promise<unknown> | undefined;
  private at = 0;
  private ended = false;

  constructor(
    private readonly respond: (request: GenerateRequest) => Promise<ModelResponse>,
    private readonly request: GenerateRequest,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<ModelStreamPart>> {
    if (this.parts !== undefined || this.ended) return Promise.resolve(this.step());
    this.ready ??= this.respond(this.request).then(
      (response) => {
        const parts = scriptedDeltas(response);
        parts.push({ type: "response", response });
        this.parts = parts;
      },
      (error: unknown) => {
        this.ended = true;
        throw error;
      },
    );
    return this.ready.then(() => this.step());
  }

  return(value?: unknown): Promise<IteratorResult<ModelStreamPart>> {
    this.ended = true;
    return Promise.resolve({ done: true, value });
  }

  throw(error?: unknown): Promise<IteratorResult<ModelStreamPart>> {
    this.ended = true;
    return Promise.reject(error);
  }

  private step(): IteratorResult<ModelStreamPart> {
    const parts = this.parts;
    if (this.ended || parts === undefined || this.at >= parts.length) {
      this.ended = true;
      return { done: true, value: undefined };
    }
    return { done: false, value: parts[this.at++] as ModelStreamPart };
  }
}

/** What a scripted model counted of one conversation array: its first `length` messages, the last of them `last`. */
interface Counted {
  length: number;
  last: Message | undefined;
  turns: number;
}

/**
 * How many assistant messages `messages` holds. A run sends the model one array, grown by each
 * turn's messages: only the messages added since this model last counted that array are counted,
 * so a run's calls cost O(1) each instead of O(n) (its whole run O(n), not O(n²)). An array that
 * did not grow from what was counted (shorter, or another message where the last counted one was)
 * is counted again in full.
 */
function assistantTurns(messages: readonly Message[], counts: WeakMap<readonly Message[], Counted>): number {
  const n = messages.length;
  let counted = counts.get(messages);
  if (
    counted === undefined ||
    counted.length > n ||
    (counted.length > 0 && messages[counted.length - 1] !== counted.last)
  ) {
    counted = { length: 0, last: undefined, turns: 0 };
    counts.set(messages, counted);
  }
  let turns = counted.turns;
  for (let i = counted.length; i < n; i++) if ((messages[i] as Message).role === "assistant") turns++;
  counted.length = n;
  counted.last = messages[n - 1];
  counted.turns = turns;
  return turns;
}

/** The deltas a scripted response streams: its content word by word, each call's input in two halves. */
export function scriptedDeltas(response: ModelResponse): ModelStreamPart[] {
  const parts: ModelStreamPart[] = [];
  for (const word of response.content?.match(/\s*\S+\s*|\s+/g) ?? []) parts.push({ type: "text-delta", delta: word });
  for (const call of response.toolCalls ?? []) {
    const json = JSON.stringify(call.input);
    if (json === undefined) continue;
    const half = Math.ceil(json.length / 2);
    for (const delta of [json.slice(0, half), json.slice(half)]) {
      if (delta !== "") parts.push({ type: "tool-input-delta", toolCallId: call.id, toolName: call.name, delta });
    }
  }
  return parts;
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

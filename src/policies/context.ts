/**
 * Context policies: what the model is sent of a conversation that outgrew its window.
 * A policy decides, before each new model call, a {@link ContextChoice}: plain data the runtime
 * journals once (`<loop>#turn:<i>:context`) and serves on a resume, so a resumed run sends the same
 * prompts; {@link applyContext} makes the prompt from the conversation and that choice, purely.
 */
import { digestOfRecorded } from "../core/digest.ts";
import { AgentLoopConfigError } from "../core/errors.ts";
import { toolStepId } from "../events/ids.ts";
import type { Message } from "../events/types.ts";

/**
 * What the model is sent of the conversation, as indices into it: the first `head` messages (the
 * system prompt and the run's input), then `summary` (if any) and a note saying how many turns
 * were left out, then the messages from `from` on, where a tool result before `referenceBefore`
 * is sent as a reference (`{ omitted: stepId, digest, bytes }`) instead of its output.
 */
export interface ContextChoice {
  readonly head: number;
  readonly from: number;
  readonly referenceBefore: number;
  /** Turns left out between the head and `from` (what the note says). */
  readonly omittedTurns: number;
  /**
   * Messages of the head left out: `[from, to)`, with a note saying how many (a session's older
   * history, which a run gets as its input). Absent: the head is sent whole.
   */
  readonly omittedInput?: readonly [number, number];
  /** What the left-out turns said, in the model's words (the `summarize` policy). */
  readonly summary?: string;
  /** The turns the summary covers (from turn 0), so the next decision can keep it. */
  readonly summarizedTurns?: number;
  /**
   * Set by the runtime when the policy asked the model (`ask`): the calls and the tokens they used,
   * journaled with the decision so that a budget counts them live and after a resume alike.
   */
  readonly asked?: { readonly modelCalls: number; readonly inputTokens: number; readonly outputTokens: number };
}

/** What a policy decides from: the conversation before model call `turn`, and the last decision. */
export interface ContextView {
  readonly loopId: string;
  /** The model call about to be made (0-based): turns 0..turn-1 are complete. */
  readonly turn: number;
  /** The whole conversation, as the loop keeps it. */
  readonly messages: readonly Message[];
  /** Where each complete turn starts: the index of turn t's assistant message. */
  readonly turnStarts: readonly number[];
  /** The decision made before the previous model call, if any (what a summary builds on). */
  readonly previous: ContextChoice | undefined;
}

/** Asks the run's model once, without tools, for a text (what `summarize` uses). */
export type AskModel = (messages: readonly Message[]) => Promise<string>;

/**
 * A context policy: pluggable (`agentLoop$({ context })`). `decide` must depend only on its view
 * (and what `ask` answers): its choice is journaled and served on resume, not decided again.
 *
 * @example
 * const everything: ContextPolicy = { name: "everything", decide: (view) => keepAll(view) };
 */
export interface ContextPolicy {
  readonly name: string;
  /** What the model is sent before model call `view.turn`: a choice journaled once, served on resume. */
  decide(view: ContextView, ask: AskModel): ContextChoice | Promise<ContextChoice>;
}

/**
 * The choice that sends the whole conversation.
 *
 * @example
 * keepAll({ loopId: "a", turn: 0, messages, turnStarts: [], previous: undefined }); // { head: messages.length, … }
 */
export function keepAll(view: ContextView): ContextChoice {
  const n = view.messages.length;
  return { head: n, from: n, referenceBefore: n, omittedTurns: 0 };
}

/**
 * Keeps the last `turns` turns as they were; the `references` turns before them (default: as many)
 * are sent with each tool output replaced by a reference to its step (id, digest, bytes: the full
 * output stays in the journal, `resolveStep` reads it); older turns are left out, with a note.
 * The prompt then stays within a bound however long the run goes. With `userMessages`, the run's
 * input (a session's history: `loop.send`) is cut too: its system messages and everything from
 * its `userMessages`-th last user message on are kept (the run's own message is the last one),
 * the older history is left out, with a note.
 *
 * @example
 * agentLoop$({ id: "researcher", model, tools, context: recentTurns(20) });
 * agentLoop$({ id: "chat", model, tools, context: recentTurns(20, { userMessages: 10 }) }); // a session's last 10 messages
 */
export function recentTurns(
  turns: number,
  options: { readonly references?: number; readonly userMessages?: number } = {},
): ContextPolicy {
  checkCount("recentTurns", turns);
  const references = options.references ?? turns;
  checkCount("recentTurns references", references);
  const userMessages = options.userMessages;
  if (userMessages !== undefined) checkCount("recentTurns userMessages", userMessages, 1);
  return {
    name: "recentTurns",
    decide(view) {
      const kept = Math.max(0, view.turn - turns);
      const first = Math.max(0, kept - references);
      const choice = window(view, first, kept);
      const omitted = userMessages === undefined ? undefined : olderInput(view.messages, choice.head, userMessages);
      return omitted === undefined ? choice : { ...choice, omittedInput: omitted };
    },
  };
}

/**
 * The part of the input (`messages[0, head)`) older than its `keep`-th last user message, after
 * its leading system messages, or undefined when nothing is left out.
 */
function olderInput(messages: readonly Message[], head: number, keep: number): [number, number] | undefined {
  let start = 0;
  while (start < head && messages[start]?.role === "system") start++;
  let seen = 0;
  for (let at = head - 1; at >= start; at--) {
    if (messages[at]?.role === "user" && ++seen === keep) return at > start ? [start, at] : undefined;
  }
  return undefined;
}

/** How `summarize` works (see {@link summarize}). */
export interface SummarizeOptions {
  /** Turns kept as they were (default 10). */
  readonly keepTurns?: number;
  /** A new summary is made each time this many more turns have fallen out of the kept ones (default 10). */
  readonly every?: number;
  /** What the model is told to do (a system message). */
  readonly instructions?: string;
}

const SUMMARY_INSTRUCTIONS =
  "Summarize the conversation below for the assistant who continues it: the goal, the facts found, the decisions made and what is left to do. Be brief.";

/**
 * Keeps the last `keepTurns` turns and replaces the older ones by a summary the run's model writes.
 * The summary is made once per `every` turns that fall out, building on the last one, and is
 * journaled in the context decision, so a resume serves it and never asks the model again.
 *
 * @example
 * agentLoop$({ id: "assistant", model, tools, context: summarize({ keepTurns: 8, every: 8 }) });
 */
export function summarize(options: SummarizeOptions = {}): ContextPolicy {
  const keepTurns = options.keepTurns ?? 10;
  const every = options.every ?? 10;
  checkCount("summarize keepTurns", keepTurns);
  checkCount("summarize every", every, 1);
  const instructions = options.instructions ?? SUMMARY_INSTRUCTIONS;
  return {
    name: "summarize",
    async decide(view, ask) {
      const out = Math.max(0, view.turn - keepTurns);
      const covered = Math.floor(out / every) * every; // turns the summary covers: it changes every `every` turns
      if (covered === 0) return keepAll(view);
      const previous = view.previous;
      const since = previous?.summarizedTurns ?? 0;
      let summary = previous?.summary;
      if (since !== covered || summary === undefined) {
        const from = since < covered && summary !== undefined ? since : 0;
        const told = view.messages.slice(turnStart(view, from), turnStart(view, covered));
        const earlier = summary === undefined || from === 0 ? "" : `Summary so far:\n${summary}\n\nThen:\n`;
        summary = await ask([
          { role: "system", content: instructions },
          { role: "user", content: `${earlier}${JSON.stringify(told)}` },
        ]);
      }
      const choice = window(view, covered, covered);
      return { ...choice, summary, summarizedTurns: covered };
    },
  };
}

/**
 * The prompt a choice makes of the conversation (pure): the head, the summary and note, then the
 * kept messages, with tool outputs before `referenceBefore` replaced by references to their steps.
 *
 * @example
 * const prompt = applyContext(messages, turnStarts, "support", recentTurns(2).decide(view, ask) as ContextChoice);
 */
export function applyContext(
  messages: readonly Message[],
  turnStarts: readonly number[],
  loopId: string,
  choice: ContextChoice,
): Message[] {
  const omit = choice.omittedInput;
  const out: Message[] =
    omit === undefined
      ? messages.slice(0, choice.head)
      : [
          ...messages.slice(0, omit[0]),
          { role: "user", content: `(${omit[1] - omit[0]} earlier messages of this conversation are left out.)` },
          ...messages.slice(omit[1], choice.head),
        ];
  if (choice.summary !== undefined) {
    out.push({ role: "user", content: `Summary of the earlier conversation:\n${choice.summary}` });
  }
  if (choice.omittedTurns > 0) {
    out.push({
      role: "user",
      content: `(${choice.omittedTurns} earlier turns of this conversation are left out${choice.summary === undefined ? "" : " and summarized above"}.)`,
    });
  }
  let turn = turnAt(turnStarts, choice.from);
  let index = 0; // the call's index in its turn
  for (let at = choice.from; at < messages.length; at++) {
    const message = messages[at] as Message;
    if (turnStarts[turn + 1] === at) {
      turn++;
      index = 0;
    }
    if (message.role === "assistant") {
      index = 0;
      out.push(message);
    } else if (message.role === "tool" && at < choice.referenceBefore) {
      const { digest, bytes } = digestOfRecorded(message.output);
      out.push({ ...message, output: { omitted: toolStepId(loopId, turn, index++), digest, bytes } });
    } else {
      if (message.role === "tool") index++;
      out.push(message);
    }
  }
  return out;
}

/** The choice that leaves out turns before `first` and sends turns [first, kept) with references. */
function window(view: ContextView, first: number, kept: number): ContextChoice {
  return {
    head: turnStart(view, 0),
    from: turnStart(view, first),
    referenceBefore: turnStart(view, kept),
    omittedTurns: first,
  };
}

/** Where turn `t` starts in the conversation (its end when the turn is not complete yet). */
function turnStart(view: ContextView, t: number): number {
  return view.turnStarts[t] ?? view.messages.length;
}

/** The turn the message at `at` belongs to (the last start at or before it; 0 before the first). */
function turnAt(turnStarts: readonly number[], at: number): number {
  let low = 0;
  let high = turnStarts.length - 1;
  let found = 0;
  while (low <= high) {
    const middle = (low + high) >>> 1;
    if ((turnStarts[middle] as number) <= at) {
      found = middle;
      low = middle + 1;
    } else high = middle - 1;
  }
  return found;
}

function checkCount(what: string, n: number, min = 0): void {
  if (!Number.isInteger(n) || n < min) {
    throw new AgentLoopConfigError(
      `context policy ${what}: expected an integer ≥ ${min}, got ${n}; fix the loop's context option`,
      "invalidContextPolicy",
    );
  }
}

import { jsonRoundTrip } from "../../core/jsonForm.ts";
import { contextDecisionId, DECISION_SOURCES } from "../../events/ids.ts";
import type { Message } from "../../events/types.ts";
import type { ContextChoice } from "../../policies/context.ts";
import type { RunSession } from "./session.ts";

/**
 * The context decision of model call `turn`: served when journaled; else, for a call not started
 * yet, decided by the loop's policy and journaled with the call's frame.started. A call the
 * journal started without one (recorded before the policy was configured) is sent as recorded.
 */
export async function contextChoice(
  session: RunSession,
  turn: number,
  frameId: string,
): Promise<ContextChoice | undefined> {
  const { config, options } = session;
  const id = contextDecisionId(config.id, turn);
  const recorded = session.state.decisions[id];
  if (recorded !== undefined) return recorded.choice as ContextChoice;
  const policy = config.context;
  if (policy === undefined || session.state.frames[frameId] !== undefined) return undefined;
  const previous = turn > 0 ? session.state.decisions[contextDecisionId(config.id, turn - 1)] : undefined;
  const view = {
    loopId: config.id,
    turn,
    messages: session.conversation.messages,
    turnStarts: session.conversation.turnStarts,
    previous: previous?.choice as ContextChoice | undefined,
  };
  const asked = { modelCalls: 0, inputTokens: 0, outputTokens: 0 };
  const ask = async (messages: readonly Message[]) => {
    const response = await config.model.generate({ messages, tools: [], signal: options.signal ?? NEVER });
    asked.modelCalls++;
    asked.inputTokens += countOf(response.usage?.inputTokens);
    asked.outputTokens += countOf(response.usage?.outputTokens);
    return typeof response.content === "string" ? response.content : "";
  };
  const decided = await policy.decide(view, ask);
  const choice = jsonRoundTrip(asked.modelCalls === 0 ? decided : { ...decided, asked }) as ContextChoice;
  // Written with the call's frame.started: a crash before it leaves neither, and the policy decides again.
  session.appender.defer({
    type: "decision.recorded",
    data: { decisionId: id, source: DECISION_SOURCES.context, choice },
  });
  return choice;
}

/** A signal never aborted: a context policy's model call in a run given none. */
const NEVER = new AbortController().signal;
const countOf = (n: unknown): number => (typeof n === "number" && Number.isFinite(n) ? n : 0);

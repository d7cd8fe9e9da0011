import {
  type AgentInterruptedError,
  agentLoop$,
  createJournal,
  memoryStore,
  recentTurns,
  scriptedModel,
  sessionHistory,
} from "loom-agent";

/**
 * A chat session of three messages, each a run (`chat-1/0`, `chat-1/1`, `chat-1/2`) on the history
 * of the ones before, rebuilt from the journal; a context policy that keeps the prompt small; and
 * a budget that stops a run before the call past it, resumed once raised.
 */
export async function sessionsExample() {
  const model = Object.assign(
    scriptedModel(({ messages }) => {
      const said = messages.flatMap((m) => (m.role === "user" ? [m.content] : []));
      return { content: `You said: ${said.join(" / ")}`, toolCalls: [], usage: { inputTokens: 40, outputTokens: 8 } };
    }),
    { id: "demo-model" },
  );
  const loop = agentLoop$({ id: "chat", model, context: recentTurns(20) });
  const journal = createJournal({ store: memoryStore({ json: true }) });

  await loop.send({ sessionId: "chat-1", journal, message: "Hello" });
  await loop.send({ sessionId: "chat-1", journal, message: "Plan a trip to Lisbon" });
  const prices = { "demo-model": { inputPerMillion: 2.5, outputPerMillion: 10 } };
  // A budget of no model call at all: the message's run stops before its first one.
  const stopped = await loop
    .send({ sessionId: "chat-1", journal, message: "In May", budget: { cost: 0, prices } })
    .catch((e: AgentInterruptedError) => e.run);
  // Raised, the same run goes on: `loop.run` resumes it by its id.
  const third = await loop.run({ runId: "chat-1/2", journal, budget: { cost: 0.01, prices } });
  const history = await sessionHistory(journal, "chat-1"); // 3 user messages, 3 answers
  return { stopped: "reason" in stopped ? stopped.reason : undefined, answer: third.content, history };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) console.log(await sessionsExample());

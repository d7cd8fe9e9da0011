import { agentLoop$, agentTool, createJournal, memoryStore, scriptedModel } from "loom-agent";

/**
 * A planner that delegates to a researcher: the researcher is a loop of its own, run as the child
 * run `<parentRunId>/<stepId>` in the same journal. Resuming the planner resumes the researcher
 * where it stopped; a finished researcher only hands its recorded answer back.
 */
export async function subAgentsExample() {
  const researcher = agentLoop$({
    id: "researcher",
    model: scriptedModel([{ content: "Lisbon: mild in May, 22 °C, little rain.", toolCalls: [] }]),
  });
  const planner = agentLoop$({
    id: "planner",
    model: scriptedModel(({ turn, messages }) => {
      if (turn === 0)
        return { toolCalls: [{ id: "q1", name: "research", input: { prompt: "Weather in Lisbon in May?" } }] };
      const last = messages.at(-1); // the researcher's answer, fed back as the tool's result
      return { content: `Go in May. (${last?.role === "tool" ? String(last.output) : ""})`, toolCalls: [] };
    }),
    tools: {
      research: agentTool(researcher, { description: "Researches a question: { prompt }", maxDepth: 2 }),
    },
  });
  const journal = createJournal({ store: memoryStore({ json: true }) });
  const out = await planner.run({ runId: "trip-1", journal, input: "When should I visit Lisbon?" });
  const runs = (await journal.store.listRuns()).map((r) => r.runId); // ["trip-1", "trip-1/planner#turn:0:tool:0"]
  return { out, runs };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) console.log(await subAgentsExample());

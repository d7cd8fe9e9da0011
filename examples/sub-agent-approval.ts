import {
  agentLoop$,
  agentTool,
  cancelRun,
  createJournal,
  isAgentInterruptedError,
  listPendingApprovals,
  memoryStore,
  recordApproval,
  scriptedModel,
} from "loom-agent";

/**
 * A concierge that delegates bookings to a booker sub-agent whose `book` tool needs a person's
 * approval. The booker stops for it, so the concierge stops too (`approval-pending`); the
 * approval is listed under the booker's run, answered there, and resuming the concierge resumes
 * the booker. A second evening is cancelled while it waits: the booker's run is cancelled with it.
 */
export async function subAgentApprovalExample() {
  const booker = agentLoop$({
    id: "booker",
    model: scriptedModel(({ turn, messages }) => {
      if (turn === 0) return { toolCalls: [{ id: "b1", name: "book", input: { table: 2, at: "20:00" } }] };
      const last = messages.at(-1); // the booking's result, fed back
      return { content: `Booked ${last?.role === "tool" ? JSON.stringify(last.output) : "?"}`, toolCalls: [] };
    }),
    tools: {
      book: { description: "Books a table", requiresApproval: true, execute: () => ({ confirmation: "T-42" }) },
    },
  });
  const concierge = agentLoop$({
    id: "concierge",
    model: scriptedModel(({ turn }) =>
      turn === 0
        ? { toolCalls: [{ id: "c1", name: "booking", input: { prompt: "A table for 2 at 8pm" } }] }
        : { content: "Your evening is set.", toolCalls: [] },
    ),
    tools: { booking: agentTool(booker, { description: "Books restaurants: { prompt }" }) },
  });
  const journal = createJournal({ store: memoryStore({ json: true }) });

  const stopped = await concierge.run({ runId: "evening-1", journal, input: "Plan my evening" }).catch((e) => e);
  if (!isAgentInterruptedError(stopped)) throw stopped;
  const [pending] = await listPendingApprovals(journal, { runId: "evening-1" }); // the booker's call, under its run
  if (pending === undefined) throw new Error("the booker's call should wait for an approval");
  await recordApproval(journal, pending.runId, pending.stepId, { approved: true, by: "ana" });
  const out = await concierge.run({ runId: "evening-1", journal }); // resumes the booker, then the concierge

  await concierge.run({ runId: "evening-2", journal, input: "Plan my evening" }).catch(() => undefined);
  const cancelled = await cancelRun(journal, "evening-2", { reason: "plans changed" });
  return { reason: stopped.run.reason, pending, out, cancelled };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) console.log(await subAgentApprovalExample());

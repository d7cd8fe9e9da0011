import { agentLoop$, isAgentInterruptedError, type Journal, scriptedModel, type Tool } from "loom-agent";

/** A support loop whose refunds need a person's yes (`requiresApproval`, and no `approve` callback). */
export function supportLoop(refunded: string[] = []) {
  const refund: Tool<{ order: string; euros: number }> = {
    description: "refunds an order",
    requiresApproval: true, // asked before every call; without `approve`, the run waits for an answer
    // Hand the payment API `idempotencyKey`: unique to this run and step, the same on a resume.
    execute: ({ order, euros }, { idempotencyKey }) => {
      refunded.push(order); // in real life: payments.refund(order, euros, { idempotencyKey })
      return { order, euros, idempotencyKey };
    },
  };
  const model = scriptedModel([
    { toolCalls: [{ id: "r1", name: "refund", input: { order: "A-17", euros: 40 } }] },
    { content: "I have answered your refund request.", toolCalls: [] },
  ]);
  return agentLoop$({ id: "support", model, tools: { refund }, toolCallLog: "lean" });
}

/** Process 1: start the run. It stops before the refund runs and says which calls wait. */
export async function ask(journal: Journal, runId: string) {
  const loop = supportLoop();
  const stopped = await loop.run({ runId, journal, input: "Please refund order A-17" }).catch((e) => e);
  if (!isAgentInterruptedError(stopped, loop)) throw stopped;
  return stopped.run.pendingApprovals; // reason "approval-pending": [{ stepId, toolName: "refund", input }]
}

/** Process 2, any time later: answer by step id (true runs the call, false declines it). */
export async function answer(journal: Journal, runId: string, approvals: Record<string, boolean>, refunded?: string[]) {
  return supportLoop(refunded).run({ runId, journal, approvals }); // goes on from the journal
}

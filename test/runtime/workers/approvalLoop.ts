import { scriptedModel } from "../../../src/models/scripted.ts";
import type { Tool } from "../../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../../src/runtime/run/agentLoop.ts";

/**
 * The loop of the approval tests: turn 0 asks for a refund (needs approval), turn 1 answers with
 * what the refund tool said (or that it was declined). Shared by the test and its child processes.
 */
export function approvalLoop(options: { readonly approvalTimeoutMs?: number } = {}) {
  const ran: unknown[] = [];
  const refund: Tool = {
    description: "refunds an order",
    requiresApproval: true,
    ...(options.approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs: options.approvalTimeoutMs }),
    execute: (input) => {
      ran.push(input);
      return { refunded: (input as { cents: number }).cents };
    },
  };
  const model = scriptedModel(({ turn, messages }) => {
    if (turn === 0) return { toolCalls: [{ id: "c1", name: "refund", input: { orderId: "o-1", cents: 500 } }] };
    const result = messages.at(-1);
    return { content: `tool said ${JSON.stringify(result?.role === "tool" ? result.output : null)}`, toolCalls: [] };
  });
  const loop = agentLoop$({ id: "shop", model, tools: { refund } });
  return { loop, ran };
}

export const REFUND_STEP = "shop#turn:0:tool:0";

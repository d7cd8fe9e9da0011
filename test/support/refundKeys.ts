import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";

/**
 * A support loop whose refund tool hands `charge` the context's idempotency key and step id, as it
 * would hand a payment API the key: the same script in every run, so every run's refund is the
 * same step (`support#turn:0:tool:0`).
 */
export function refundLoop(charge: (idempotencyKey: string, stepId: string) => unknown) {
  return agentLoop$({
    id: "support",
    model: scriptedModel([
      { toolCalls: [{ id: "r1", name: "refund", input: { order: "A-17", euros: 40 } }] },
      { content: "Refunded.", toolCalls: [] },
    ]),
    tools: {
      refund: {
        description: "refunds an order",
        onUnknownOutcome: "retry",
        execute: (_input, { idempotencyKey, stepId }) => charge(idempotencyKey, stepId),
      },
    },
  });
}

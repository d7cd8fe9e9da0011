import type { ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";

const toolResults = (messages: readonly { role: string; output?: unknown }[]) =>
  messages
    .filter((m) => m.role === "tool")
    .map((m) => JSON.stringify(m.output))
    .join(" | ");

/**
 * The sub-agent tests' chain: planner → (researcher →)? refunder, whose refund tool needs an
 * approval; every model call and refund counted. `fan-out` has the planner call its sub-agent
 * twice at once (two refunders, each waiting for the same step id). Each model's answer holds the
 * tool results it was given, so a test sees what went up the chain.
 */
export function refundChain(shape: "one" | "two-deep" | "fan-out") {
  const refunds: unknown[] = [];
  const refund: Tool = {
    description: "refunds an order",
    requiresApproval: true,
    execute: (input) => {
      refunds.push(input);
      return { refunded: (input as { order: string }).order };
    },
  };
  const models = {
    refunder: scriptedModel(({ turn, messages }) =>
      turn === 0
        ? { toolCalls: [{ id: "r", name: "refund", input: { order: "A-7" } }] }
        : { content: `refunder: ${toolResults(messages)}`, toolCalls: [] },
    ),
    researcher: scriptedModel(({ turn, messages }) =>
      turn === 0
        ? { toolCalls: [{ id: "s", name: "refunds", input: { prompt: "A-7" } }] }
        : { content: `researcher: ${toolResults(messages)}`, toolCalls: [] },
    ),
    planner: scriptedModel(({ turn, messages }): ModelResponse => {
      if (turn > 0) return { content: `planner: ${toolResults(messages)}`, toolCalls: [] };
      const call = (id: string) => ({ id, name: "delegate", input: { prompt: id } });
      return { toolCalls: shape === "fan-out" ? [call("d1"), call("d2")] : [call("d1")] };
    }),
  };
  const refunder = agentLoop$({ id: "refunder", model: models.refunder, tools: { refund } });
  const researcher = agentLoop$({
    id: "researcher",
    model: models.researcher,
    tools: { refunds: agentTool(refunder, { description: "refunds orders" }) },
  });
  const planner = agentLoop$({
    id: "planner",
    model: models.planner,
    tools: { delegate: agentTool(shape === "two-deep" ? researcher : refunder, { description: "does it" }) },
  });
  const calls = () => [models.planner.calls, models.researcher.calls, models.refunder.calls];
  return { planner, calls, refunds };
}

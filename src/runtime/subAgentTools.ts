/**
 * The tools `agentTool` made: their calls run as `toolCall` charts, not in the run's `plainCalls`
 * actor, since a sub-agent's call can wait (its child waits for an approval) and the inspector shows
 * the child's chart under the call's own actor (`call:<index>`).
 */
import type { Tool } from "./config.ts";

const subAgentTools = new WeakSet<object>();

/** Marks `tool` as one `agentTool` made; returns it. */
export function markSubAgentTool<T extends Tool<never, unknown>>(tool: T): T {
  subAgentTools.add(tool);
  return tool;
}

/** Whether `tool` runs a sub-agent (made by `agentTool`). */
export const isSubAgentTool = (tool: object): boolean => subAgentTools.has(tool);

/**
 * The tools `agentTool` made: their calls run as `toolCall` charts, not in the run's `plainCalls`
 * actor, since a sub-agent's call can wait (its child waits for an approval) and the inspector shows
 * the child's chart under the call's own actor (`call:<index>`). The mark is the tool's own (a
 * property no spread copies, so a tool wrapped by the caller is no longer known as a sub-agent's),
 * not a registry of tools.
 */
import type { Tool } from "../base/config.ts";

const SUB_AGENT = Symbol("loom.subAgentTool");

/** Marks `tool` as one `agentTool` made; returns it. */
export function markSubAgentTool<T extends Tool<never, unknown>>(tool: T): T {
  Object.defineProperty(tool, SUB_AGENT, { value: true, enumerable: false });
  return tool;
}

/** Whether `tool` runs a sub-agent (made by `agentTool`). */
export const isSubAgentTool = (tool: object): boolean => Object.hasOwn(tool, SUB_AGENT);

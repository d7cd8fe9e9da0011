import type { ToolDescriptor } from "../../models/types.ts";
import type { AgentLoopConfig, Tool } from "../base/config.ts";

/** The built-in call that lists tools matching a query; settled without running a tool. */
export const SEARCH_TOOLS = "search_tools";

/**
 * Whether the model is told of `search_tools`: only when the loop asks (`searchTools: true`). Loom
 * has no deferred tools (every tool is told on every call), so by default it would only repeat
 * the list the model already has, and add a tool the user never declared to every call.
 */
export const offersSearchTools = (config: AgentLoopConfig): boolean => config.searchTools === true;

/**
 * Whether a call of `search_tools` (when no tool has that name) is answered: unless the loop says
 * `searchTools: false`. Earlier versions offered it by default, and the offer is not journaled: a
 * run they recorded may hold a call of it, which a resume must answer as they did.
 */
export const answersSearchTools = (config: AgentLoopConfig): boolean => config.searchTools !== false;
/** The built-in call that activates a skill; settled without running a tool. */
export const SKILL_ACTIVATION = "activate_skill";

/** Tool descriptions whose name or description contains every word of `input.query`. */
export function searchTools(
  tools: Readonly<Record<string, Tool>>,
  input: unknown,
): { name: string; description: string }[] {
  const query =
    typeof (input as { query?: unknown } | null)?.query === "string" ? (input as { query: string }).query : "";
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  return Object.entries(tools)
    .filter(([name, t]) => words.every((w) => `${name} ${t.description}`.toLowerCase().includes(w)))
    .map(([name, t]) => ({ name, description: t.description }));
}

/** What the model is told it can call: the tools, then the built-ins that are on. */
export function toolDescriptors(config: AgentLoopConfig): ToolDescriptor[] {
  const out: ToolDescriptor[] = Object.entries(config.tools ?? {}).map(([name, t]) =>
    t.inputSchema === undefined
      ? { name, description: t.description }
      : { name, description: t.description, inputSchema: t.inputSchema },
  );
  if (offersSearchTools(config)) {
    out.push({
      name: SEARCH_TOOLS,
      description: "Lists the available tools whose name or description contains every word of the query.",
      inputSchema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
    });
  }
  if (config.skills && Object.keys(config.skills).length > 0) {
    const names = Object.entries(config.skills).map(([n, s]) => `${n}: ${s.description}`);
    out.push({
      name: SKILL_ACTIVATION,
      description: `Activates a skill and returns its instructions. Skills: ${names.join("; ")}`,
      inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
    });
  }
  return out;
}

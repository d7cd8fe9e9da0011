import { AgentLoopConfigError, ToolSourceError } from "../../core/errors.ts";
import { DECISION_SOURCES, isIdName, toolListId } from "../../events/ids.ts";
import { type ListedTool, readToolList, type ToolListChoice } from "../../events/toolList.ts";
import type { NewEntry } from "../../events/types.ts";
import type { ToolDescriptor } from "../../models/types.ts";
import type { RunState } from "../../projections/runState.ts";
import type { AgentLoopConfig, Tool, ToolSource } from "../base/config.ts";
import { offersSearchTools, SEARCH_TOOLS, SKILL_ACTIVATION, toolDescriptors } from "./builtins.ts";
import type { RunSession } from "./session.ts";

/** The run's tool table and the descriptors the model is told of, with the decisions that journal its sources' lists. */
export interface RunTools {
  readonly tools: Readonly<Record<string, Tool>>;
  readonly toolDescriptors: readonly ToolDescriptor[];
  /** The lists asked live, to journal with prepare's append (none when every list was journaled). */
  readonly entries: readonly NewEntry[];
}

/** The loop's own tools, when it has no tool sources. */
export function loopTools(config: AgentLoopConfig): RunTools {
  return { tools: config.tools ?? {}, toolDescriptors: toolDescriptors(config), entries: [] };
}

/**
 * The run's tools from its sources (MCP servers and the like), called by `prepare` before its first append:
 * each source's list is read from the journal, or, the first time, asked of the source live and
 * returned as the decision to journal with prepare's append. The run's tool table and the
 * descriptors the model is told of are the loop's tools plus every source's, built from the
 * list's JSON form, so a live run and its resume see the same tools. Nothing is appended here.
 */
export async function prepareToolSources(session: RunSession, state: RunState): Promise<RunTools> {
  const { config, options } = session;
  const sources = config.toolSources ?? [];
  if (sources.length === 0) return loopTools(config);
  const runId = options.runId;
  const entries: NewEntry[] = [];
  // No prototype: a tool may be named "__proto__" or "constructor".
  const tools: Record<string, Tool> = Object.assign(Object.create(null), config.tools ?? {});
  const from = new Map<string, string>(); // tool name → the source that gave it
  for (const source of sources) {
    const decisionId = toolListId(config.id, source.name);
    const recorded = state.decisions[decisionId];
    let listed: readonly ListedTool[];
    if (recorded) listed = readToolList(runId, recorded);
    else {
      const choice = await listLive(source, runId, decisionId, options.signal);
      listed = choice.tools;
      entries.push({ type: "decision.recorded", data: { decisionId, source: DECISION_SOURCES.toolList, choice } });
    }
    for (const [name, tool] of Object.entries(source.tools(listed))) {
      const clash = Object.hasOwn(tools, name)
        ? from.has(name)
          ? `tool source "${from.get(name)}"`
          : "the loop's tools"
        : (name === SEARCH_TOOLS && offersSearchTools(config)) || (name === SKILL_ACTIVATION && config.skills)
          ? "a built-in tool"
          : undefined;
      if (clash) {
        throw new AgentLoopConfigError(
          `run ${runId}: tool source "${source.name}" has a tool named ${JSON.stringify(name)}, and so has ${clash}; give the source a prefix (mcpTools(client, { server, prefix })) or rename the loop's tool.`,
          "toolNameClash",
        );
      }
      tools[name] = tool;
      from.set(name, source.name);
    }
  }
  return { tools, toolDescriptors: toolDescriptors({ ...config, tools }), entries };
}

/** A source's live list in its JSON form (what the journal gives back), checked as a resume will read it. */
async function listLive(
  source: ToolSource,
  runId: string,
  decisionId: string,
  signal: AbortSignal | undefined,
): Promise<ToolListChoice> {
  let text: string | undefined;
  try {
    text = JSON.stringify(await source.list({ runId, signal }));
  } catch (e) {
    throw new ToolSourceError(runId, source.name, e);
  }
  const choice = { source: source.name, tools: text === undefined ? undefined : JSON.parse(text) };
  try {
    readToolList(runId, { decisionId, source: DECISION_SOURCES.toolList, choice });
  } catch (e) {
    throw new ToolSourceError(runId, source.name, e, "its list is not a list of named tools in JSON");
  }
  return choice as ToolListChoice;
}

/** Checks `toolSources` with the rest of the configuration; throws `AgentLoopConfigError` naming the source. */
export function validateToolSources(config: AgentLoopConfig, fail: (what: string) => Error): void {
  const sources: unknown = config.toolSources;
  if (sources === undefined) return;
  if (!Array.isArray(sources)) throw fail("toolSources must be an array of tool sources (mcpTools(...))");
  const names = new Set<string>();
  sources.forEach((s: Partial<ToolSource> | null, i) => {
    const name = s?.name;
    if (typeof name !== "string" || !isIdName(name)) {
      throw fail(
        `toolSources[${i}].name must be a non-empty string of letters, digits, "_", ".", ":" or "-" (it is part of a decision id), not ${JSON.stringify(name)}`,
      );
    }
    if (typeof s?.list !== "function" || typeof s.tools !== "function")
      throw fail(`tool source "${name}" must have list(context) and tools(listed) functions`);
    if (names.has(name)) throw fail(`two tool sources are named "${name}"; give each its own name`);
    names.add(name);
  });
}

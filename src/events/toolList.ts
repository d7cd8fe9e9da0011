import { JournalFormatError } from "../core/errors.ts";
import type { DecisionRecordedData } from "./types.ts";

/**
 * The tool-list grammar: a tool source's list (an MCP server's tools) is journaled
 * once per run as the decision `<loop>#tools:<source>`, source `tool-list`, choice
 * `{ source, tools: ListedTool[] }`. A resume reads the list from here, so the model is told the
 * same tools across a crash and no live server is needed until a new call must be made.
 * {@link readToolList} is the one reader of a recorded list.
 */

/** The `source` of a tool-list decision. */
export const TOOL_LIST_SOURCE = "tool-list";

/** What sits between the loop id and the source's name in a tool-list decision id. */
export const TOOL_LIST_INFIX = "#tools:";

/**
 * One tool of a source's list, as journaled: JSON data only. `name` is the source's own name for
 * it (an MCP tool's name); the source decides what the model calls it.
 */
export interface ListedTool {
  readonly name: string;
  readonly description?: string;
  /** JSON Schema of the input. */
  readonly inputSchema?: unknown;
  /** Anything else the source keeps of the tool (an MCP tool's outputSchema, annotations). */
  readonly [key: string]: unknown;
}

/** What a tool-list decision records. */
export interface ToolListChoice {
  /** The source's name (`mcpTools(client, { server })`: the server's name). */
  readonly source: string;
  readonly tools: readonly ListedTool[];
}

/**
 * The list a tool-list decision records. Anything but `{ source, tools: [{ name: string, … }] }`
 * with distinct names raises `JournalFormatError` naming the run, the seq (when known) and the
 * decision: a run whose tools cannot be read back is never resumed with other tools.
 *
 * @example
 * readToolList("run-1", { decisionId: "support#tools:fs", source: "tool-list", choice: { source: "fs", tools: [{ name: "read" }] } });
 * // [{ name: "read" }]
 */
export function readToolList(runId: string, decision: DecisionRecordedData, seq?: number): readonly ListedTool[] {
  const bad = (field: string, what: string) =>
    new JournalFormatError(
      runId,
      seq,
      field,
      `the tool list ${decision.decisionId} ${what}; the journal was altered or written by another program: restore it from a backup, or start a new run`,
    );
  const choice = decision.choice as { readonly tools?: unknown } | null | undefined;
  const tools = choice?.tools;
  if (!Array.isArray(tools)) throw bad("data.choice.tools", "holds no list of tools");
  const seen = new Set<string>();
  tools.forEach((tool: unknown, i) => {
    const name = (tool as { name?: unknown } | null)?.name;
    if (typeof tool !== "object" || tool === null || typeof name !== "string" || name === "") {
      throw bad(`data.choice.tools[${i}]`, "holds a tool without a name");
    }
    if (seen.has(name)) throw bad(`data.choice.tools[${i}]`, `names the tool ${JSON.stringify(name)} twice`);
    seen.add(name);
  });
  return tools as ListedTool[];
}

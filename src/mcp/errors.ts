import { errorGuard, LoomError } from "../core/errors.ts";

/**
 * An MCP tool answered with `isError: true`: the call ran and the server says it failed. The
 * model is fed `{ error: "McpToolError", message }` (the result's text), as for any tool that
 * throws; it is not retryable (`isRetryable: false`), since the server answered.
 *
 * @example
 * const fed = out.toolCallLog[0]?.toolOutput; // { error: "McpToolError", message: "division by zero" }
 */
export class McpToolError extends LoomError {
  /** The MCP server's name (`mcpTools(client, { server })`). */
  readonly server: string;
  /** The tool's name on the server. */
  readonly tool: string;
  readonly stepId: string;
  /** The result's content blocks, as the server sent them. */
  readonly content: unknown;
  /** Read by the retry policy: the server answered, so the same call would fail the same way. */
  readonly isRetryable = false;
  constructor(server: string, tool: string, stepId: string, content: unknown) {
    super("mcpToolError", errorText(content) || `MCP tool ${tool} of server ${server} failed (step ${stepId})`);
    this.server = server;
    this.tool = tool;
    this.stepId = stepId;
    this.content = content;
  }
}

/** Whether `e` is an {@link McpToolError}. */
export const isMcpToolError = errorGuard(McpToolError, { codes: ["mcpToolError"] });

/** The text blocks of an error result, joined: what the server said went wrong. */
function errorText(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .flatMap((block: { type?: unknown; text?: unknown } | null) =>
      block?.type === "text" && typeof block.text === "string" ? [block.text] : [],
    )
    .join("\n");
}

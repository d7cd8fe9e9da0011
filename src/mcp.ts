/**
 * `loom-agent/mcp`: an MCP server's tools as a durable tool source (`mcpTools`). The official
 * `@modelcontextprotocol/sdk` is an optional peer: you create and connect its `Client`; nothing
 * here loads it.
 */
export { isMcpToolError, McpToolError } from "./mcp/errors.ts";
export {
  type McpCallToolResult,
  type McpClient,
  type McpListedTool,
  type McpListToolsResult,
  type McpRequestOptions,
  type McpToolPolicy,
  type McpToolsOptions,
  mcpTools,
} from "./mcp/tools.ts";

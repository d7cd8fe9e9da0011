import type { ListedTool } from "../events/toolList.ts";
import type { Tool, ToolSource } from "../tools/spi.ts";
import { McpToolError } from "./errors.ts";

/**
 * What Loom uses of an MCP client: the official SDK's `Client` (`@modelcontextprotocol/sdk`),
 * connected, is one. Declared here, structurally, so `loom-agent/mcp` loads nothing of the SDK.
 */
export interface McpClient {
  /** `tools/list`: one page of the server's tools. */
  listTools(params?: { cursor?: string }, options?: McpRequestOptions): Promise<McpListToolsResult>;
  /** `tools/call`: runs one tool on the server (Loom passes no result schema: the SDK's default). */
  callTool(
    params: { name: string; arguments?: Record<string, unknown>; _meta?: Record<string, unknown> },
    resultSchema?: unknown,
    options?: McpRequestOptions,
  ): Promise<McpCallToolResult>;
}

/** The SDK's request options that Loom passes: the run's signal, and a tool's `timeoutMs`. */
export interface McpRequestOptions {
  signal?: AbortSignal;
  timeout?: number;
}

/** A `tools/list` page, as the SDK returns it. */
export interface McpListToolsResult {
  readonly tools: readonly McpListedTool[];
  readonly nextCursor?: string | undefined;
}

/** One tool of a `tools/list` answer (the fields Loom keeps). */
export interface McpListedTool {
  readonly name: string;
  readonly title?: string | undefined;
  readonly description?: string | undefined;
  readonly inputSchema?: unknown;
  readonly outputSchema?: unknown;
  readonly annotations?: unknown;
}

/** A `tools/call` answer, as the SDK returns it (`toolResult`: servers of the 2024-10-07 protocol). */
export interface McpCallToolResult {
  readonly content?: unknown;
  readonly structuredContent?: unknown;
  readonly isError?: boolean | undefined;
  readonly toolResult?: unknown;
  readonly [key: string]: unknown;
}

/** The parts of a `Tool` that say how Loom runs a call: retries, time limit, approval, a crash mid-call. */
export type McpToolPolicy = Pick<Tool, "onUnknownOutcome" | "requiresApproval" | "retry" | "timeoutMs">;

/** How `mcpTools` presents a server's tools to the loop. */
export interface McpToolsOptions {
  /**
   * The server's name: the tool source's name, in the journal (`<loop>#tools:<server>`) and the
   * definition pin. Keep it stable across deployments: a run recorded with one server name is
   * resumed with the same one.
   */
  readonly server: string;
  /** Put before each tool's name, for the model (`files_` → `files_read`): keeps two servers' tools apart. */
  readonly prefix?: string;
  /** Applied to every tool of the server (e.g. `onUnknownOutcome: "fail"` for a server whose calls must not run twice). */
  readonly policy?: McpToolPolicy;
  /** Per tool, by the server's name for it: over `policy`. */
  readonly tools?: Readonly<Record<string, McpToolPolicy>>;
}

/** Pages of `tools/list` read at most: a server whose cursor never ends is refused rather than followed forever. */
const MAX_PAGES = 100;

/**
 * An MCP server's tools as a tool source for `agentLoop$({ toolSources })`. The server's tool
 * list is journaled once per run (the decision `<loop>#tools:<server>`), so a resumed run tells
 * the model the same tools and needs no live server until a new call must be made; journaled
 * calls are served from the journal. Each call is a tool frame like any other: an `isError`
 * result, a protocol error or a lost connection is fed back to the model as the call's failure
 * (`McpToolError` for `isError`); the output is `{ content, structuredContent? }`; the tools'
 * `onUnknownOutcome`, `retry`, `timeoutMs` and `requiresApproval` come from `policy` and `tools`.
 * Each `tools/call` carries `_meta`: `"loom/idempotencyKey"` (the call's `ToolContext.idempotencyKey`,
 * unique to the run and the step, the same when a resume sends the call again: the key for a server
 * that must not act twice), `"loom/runId"` and `"loom/stepId"` (the step, the same in every run).
 *
 * `client` is a connected SDK `Client`, or a function that connects one: it is called the first
 * time the server is needed (listing at a run's start, or a new call), so a resume whose calls are
 * all journaled never starts the server.
 *
 * @example
 * ```ts
 * import { Client } from "@modelcontextprotocol/sdk/client/index.js";
 * import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
 * import { mcpTools } from "loom-agent/mcp";
 *
 * const connect = async () => {
 *   const client = new Client({ name: "support", version: "1.0.0" });
 *   await client.connect(new StdioClientTransport({ command: "npx", args: ["my-mcp-server"] }));
 *   return client;
 * };
 * const loop = agentLoop$({ id: "support", model, toolSources: [mcpTools(connect, { server: "orders" })] });
 * ```
 */
export function mcpTools(
  client: McpClient | (() => McpClient | Promise<McpClient>),
  options: McpToolsOptions,
): ToolSource {
  const { server, prefix = "", policy = {}, tools: perTool = {} } = options;
  let connecting: Promise<McpClient> | undefined;
  // Connected once, on first need; a failed connect is tried again by the next need.
  const connected = (): Promise<McpClient> => {
    if (typeof client !== "function") return Promise.resolve(client);
    connecting ??= Promise.resolve()
      .then(client)
      .catch((e) => {
        connecting = undefined;
        throw e;
      });
    return connecting;
  };

  return {
    name: server,
    async list({ signal }) {
      const c = await connected();
      const listed: ListedTool[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_PAGES; page++) {
        const answer = await c.listTools(cursor === undefined ? undefined : { cursor }, signal ? { signal } : {});
        for (const tool of answer.tools) listed.push(listedTool(tool));
        cursor = answer.nextCursor;
        if (cursor === undefined) return listed;
      }
      throw new Error(`the server's tools/list gave more than ${MAX_PAGES} pages`);
    },
    tools(listed) {
      const out: Record<string, Tool> = Object.create(null);
      for (const t of listed) {
        const own = Object.hasOwn(perTool, t.name) ? perTool[t.name] : undefined;
        const chosen: McpToolPolicy = { ...policy, ...own };
        out[`${prefix}${t.name}`] = {
          ...chosen,
          description: t.description ?? (typeof t.title === "string" ? t.title : ""),
          inputSchema: t.inputSchema ?? { type: "object" },
          validateInput: (input) =>
            typeof input === "object" && input !== null && !Array.isArray(input)
              ? { ok: true, value: input }
              : { ok: false, message: `${t.name} takes an object of named arguments (MCP tools/call)` },
          async execute(input, { stepId, runId, idempotencyKey, signal }) {
            const c = await connected();
            const _meta: Record<string, unknown> = { "loom/idempotencyKey": idempotencyKey, "loom/stepId": stepId };
            if (runId !== undefined) _meta["loom/runId"] = runId;
            const request = { name: t.name, arguments: input as Record<string, unknown>, _meta };
            const answer = await c.callTool(request, undefined, {
              signal,
              ...(chosen.timeoutMs === undefined ? {} : { timeout: chosen.timeoutMs }),
            });
            if (answer.isError === true) throw new McpToolError(server, t.name, stepId, answer.content);
            if ("toolResult" in answer && answer.content === undefined) return answer.toolResult;
            return answer.structuredContent === undefined
              ? { content: answer.content ?? [] }
              : { content: answer.content ?? [], structuredContent: answer.structuredContent };
          },
        };
      }
      return out;
    },
  };
}

/** What the journal keeps of a listed tool: what the model is told, and the schemas and hints a reader may want. */
function listedTool(tool: McpListedTool): ListedTool {
  const out: Record<string, unknown> = { name: tool.name };
  if (tool.title !== undefined) out.title = tool.title;
  if (tool.description !== undefined) out.description = tool.description;
  if (tool.inputSchema !== undefined) out.inputSchema = tool.inputSchema;
  if (tool.outputSchema !== undefined) out.outputSchema = tool.outputSchema;
  if (tool.annotations !== undefined) out.annotations = tool.annotations;
  return out as ListedTool;
}

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { agentLoop$, createJournal, isAgentInterruptedError, memoryStore, scriptedModel } from "loom-agent";
import { mcpTools } from "loom-agent/mcp";
import { z } from "zod";

/**
 * An MCP server's tools in a durable loop. The server's tool list is journaled when the run
 * starts; the run stops (a crash would do the same), the server goes away, and the resume needs
 * it no more: the model is told the same tools and the journaled call is served.
 * In real life `connect` starts a server with `StdioClientTransport` or reaches one over HTTP.
 */
export async function mcpExample(log: (...args: unknown[]) => void = console.log) {
  let connects = 0;
  let serverUp = true;
  const connect = async () => {
    connects++;
    if (!serverUp) throw new Error("the orders server is down");
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await ordersServer().connect(serverSide);
    const client = new Client({ name: "support", version: "1.0.0" });
    await client.connect(clientSide);
    return client;
  };
  const loop = (maxIterations?: number) =>
    agentLoop$({
      id: "support",
      model: scriptedModel([
        { toolCalls: [{ id: "o1", name: "order_status", input: { order: "A-17" } }] },
        { content: "Order A-17 shipped on Monday.", toolCalls: [] },
      ]),
      toolSources: [mcpTools(connect, { server: "orders", policy: { onUnknownOutcome: "fail" } })],
      toolCallLog: "lean",
      maxIterations,
    });
  const journal = createJournal({ store: memoryStore({ json: true }) });

  // Process 1: lists the server's tools (journaled), calls order_status, stops before the answer.
  const stopped = await loop(1)
    .run({ runId: "ticket-9", journal, input: "Where is order A-17?" })
    .catch((e) => e);
  log(isAgentInterruptedError(stopped) ? `stopped: ${stopped.run.reason}` : stopped);

  // Process 2, with the server gone: nothing left to ask it, so it is never reached.
  serverUp = false;
  const out = await loop().run({ runId: "ticket-9", journal });
  log(out.content, out.toolCallLog[0]);
  return { out, connects };
}

/** A small MCP server with one tool whose answer has structured content. */
function ordersServer() {
  const server = new McpServer({ name: "orders", version: "1.0.0" });
  server.registerTool(
    "order_status",
    {
      description: "The shipping status of an order",
      inputSchema: { order: z.string() },
      outputSchema: { order: z.string(), status: z.string() },
    },
    async ({ order }) => {
      const structuredContent = { order, status: "shipped" };
      return { content: [{ type: "text", text: `${order}: shipped` }], structuredContent };
    },
  );
  return server;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) await mcpExample();

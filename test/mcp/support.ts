import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { type ModelResponse, scriptedModel, type ToolDescriptor } from "../../src/index.ts";
import type { Script } from "../../src/journal.ts";
import { calculatorServer } from "../fixtures/mcpServer.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * A connected SDK client and the in-process server behind it (linked in-memory transports); each
 * call's tool name goes to `calls`, and its request's `_meta` to `metas`.
 */
export async function inMemoryServer(calls: string[], metas: (Readonly<Record<string, unknown>> | undefined)[] = []) {
  const server = calculatorServer((tool, meta) => {
    calls.push(tool);
    metas.push(meta);
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "loom-test", version: "1.0.0" });
  await client.connect(clientSide);
  return {
    client,
    async close() {
      await client.close();
      await server.close();
    },
  };
}

/** Connects an SDK client to the fixture server run as a child process over stdio. */
export async function stdioServer(callsFile: string) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", "tsx", "test/fixtures/mcpServer.ts"],
    cwd: root,
    env: { ...(process.env as Record<string, string>), MCP_CALLS_FILE: callsFile },
    stderr: "pipe",
  });
  const client = new Client({ name: "loom-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, pid: transport.pid, close: () => client.close() };
}

/** A scripted model that keeps the tools it was told of, call by call. */
export function recordingModel(script: Script) {
  const told: (readonly ToolDescriptor[])[] = [];
  const inner = scriptedModel(script);
  return {
    told,
    get calls() {
      return inner.calls;
    },
    generate(request: Parameters<typeof inner.generate>[0]): Promise<ModelResponse> {
      told.push(request.tools);
      return inner.generate(request);
    },
  };
}

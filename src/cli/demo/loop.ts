import { statSync } from "node:fs";
import { join } from "node:path";
import { type AgentLoop, agentLoop$, type Message, type ModelResponse, scriptedModel, type Tool } from "../../index.ts";
import { type DemoToolContext, demoTools, packageFiles } from "./tools.ts";

/**
 * The demo's loop: a scripted model that surveys the package with four tools, one call a turn,
 * for as many turns as its prompt says, then sums up. Its definition lives here so that
 * `loom resume` rebuilds the very loop that recorded a demo run.
 */

export const DEMO_LOOP_ID = "loom-demo";
/** The most turns a demo run may ask for (its loop's maxIterations is one more). */
export const MAX_DEMO_TURNS = 1000;

/** The demo run's input: the model reads its plan, the number of turns, from it. */
export const demoPrompt = (turns: number): string =>
  `Survey the loom package in ${turns} tool calls, then sum up what you found.`;

/** The number of turns a demo prompt asks for, or undefined for another input. */
export function demoTurns(input: unknown): number | undefined {
  const text = typeof input === "string" ? input : undefined;
  const m = text === undefined ? null : /in (\d+) tool calls/.exec(text);
  return m ? Number(m[1]) : undefined;
}

export interface DemoLoopOptions extends DemoToolContext {
  /** Called before each tool runs (the demo's worker uses it to stop at its crash point). */
  readonly beforeTool?: (stepId: string) => Promise<void>;
}

/**
 * The demo's loop, lean log. The model is deterministic: turn i's call depends on i and the
 * package's file list only, and its answer on the conversation, which a resume rebuilds.
 *
 * @example
 * const loop = demoLoop({ root: packageRoot(), journal, runId });
 * await loop.run({ runId, journal, input: demoPrompt(200) });
 */
export function demoLoop(options: DemoLoopOptions): AgentLoop & { readonly toolCalls: () => number } {
  const files = packageFiles(options.root);
  const big = files.filter((f) => statSync(join(options.root, f)).size >= 6000);
  // Folders with enough files to fill an output (src and test in a clone, dist where installed), and the root.
  const counts = new Map<string, number>();
  for (const f of files)
    if (f.includes("/")) counts.set(f.split("/")[0] as string, (counts.get(f.split("/")[0] as string) ?? 0) + 1);
  const dirs = [...[...counts].filter(([, n]) => n >= 20).map(([dir]) => dir), "."];
  const plan = (turn: number): ModelResponse => {
    const maxBytes = 1600 + ((turn * 7919) % 2300); // 1.6–3.9 kB, spread over the run
    const call = (name: string, input: Record<string, unknown>, what: string) => ({
      content: `Turn ${turn}: ${what}.`,
      toolCalls: [{ id: `call-${turn}`, name, input: { ...input, maxBytes } }],
    });
    const pick = (k: number) => big[(turn * k) % big.length] ?? "package.json";
    switch (turn % 5) {
      case 1:
        return call("word_stats", { path: pick(11) }, `counting the words of ${pick(11)}`);
      case 2: {
        const dir = dirs[turn % dirs.length] ?? ".";
        return call("checksum_tree", { dir }, `hashing the files under ${dir}`);
      }
      case 4:
        if (turn >= 10) return call("query_journal", {}, "reading back what the journal holds so far");
        return call("read_file", { path: pick(13) }, `reading ${pick(13)}`);
      default:
        return call("read_file", { path: pick(7) }, `reading ${pick(7)}`);
    }
  };
  const model = scriptedModel(({ messages, turn }) => {
    const prompt = messages.find((m) => m.role === "user");
    const turns = demoTurns(prompt && "content" in prompt ? prompt.content : undefined) ?? 0;
    return turn < turns ? plan(turn) : { content: sumUp(messages), toolCalls: [] };
  });
  let toolCalls = 0;
  const tools = Object.fromEntries(
    Object.entries(demoTools(options)).map(([name, tool]): [string, Tool] => [
      name,
      {
        ...tool,
        async execute(input, context) {
          await options.beforeTool?.(context.stepId);
          toolCalls++;
          return tool.execute(input, context);
        },
      },
    ]),
  );
  const loop = agentLoop$({
    id: DEMO_LOOP_ID,
    model,
    tools,
    toolCallLog: "lean",
    maxIterations: MAX_DEMO_TURNS + 1,
    system: "You are surveying a TypeScript package with the tools you are given.",
  });
  return { ...loop, toolCalls: () => toolCalls };
}

/** The model's final answer: what the tool results it was fed add up to. */
function sumUp(messages: readonly Message[]): string {
  const results = messages.filter((m) => m.role === "tool");
  const byTool = new Map<string, number>();
  let bytes = 0;
  for (const m of results) {
    byTool.set(m.toolName, (byTool.get(m.toolName) ?? 0) + 1);
    bytes += Buffer.byteLength(JSON.stringify(m.output) ?? "");
  }
  const calls = [...byTool].map(([name, n]) => `${name} ×${n}`).join(", ");
  return `Surveyed the package in ${results.length} tool calls (${calls}): ${(bytes / 1024).toFixed(1)} kB of results.`;
}

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { packageRoot } from "../../src/cli/packageRoot.ts";

const root = packageRoot();
const FENCE = "```";
const read = (path: string) => readFileSync(join(root, path), "utf8");
const blocksIn = (doc: string, lang: string) =>
  [...read(doc).matchAll(new RegExp(`${FENCE}${lang}\\n([\\s\\S]*?)\\n${FENCE}`, "g"))].map((m) => m[1] ?? "");
const docs = ["README.md", ...readdirSync(join(root, "docs")).flatMap((f) => (f.endsWith(".md") ? [`docs/${f}`] : []))];

const print = async (argv: string[]) => {
  let out = "";
  const code = await main(argv, {
    stdout: { write: (t: string) => (out += t) },
    stderr: { write: () => true },
    cwd: root,
  });
  expect(code).toBe(0);
  return out.trimEnd();
};

/** Which page shows each example whole; a test runs each example (test/examples/<name>.test.ts). */
const shown: Record<string, string> = {
  "examples/quickstart.ts": "README.md",
  "examples/approvals.ts": "docs/approvals.md",
  "examples/operating.ts": "docs/operating-runs.md",
  "examples/mcp.ts": "docs/mcp-and-sub-agents.md",
  "examples/sub-agents.ts": "docs/mcp-and-sub-agents.md",
  "examples/use-chat.ts": "docs/ai-sdk.md",
};

describe("the guides' examples", () => {
  for (const [example, doc] of Object.entries(shown)) {
    it(`${doc} shows ${example} as it is`, () => {
      expect(blocksIn(doc, "ts")).toContain(read(example).trimEnd());
    });
  }

  it("shows no whole example that is not its file as it is", () => {
    // A block that exports something is a whole example file: it must be one, unchanged.
    const examples = readdirSync(join(root, "examples")).map((f) => read(`examples/${f}`).trimEnd());
    const stale = docs.flatMap((doc) =>
      blocksIn(doc, "ts")
        .filter((block) => /^export /m.test(block) && !examples.includes(block))
        .map((block) => `${doc}: ${block.split("\n").find((l) => l.startsWith("export "))}`),
    );
    expect(stale).toEqual([]);
  });

  it("docs/statecharts.md shows the diagrams `loom machine … --mermaid` prints", async () => {
    expect(blocksIn("docs/statecharts.md", "mermaid")).toEqual([
      await print(["machine", "agentLoop", "--mermaid"]),
      await print(["machine", "modePin", "--mermaid"]),
    ]);
  });
});

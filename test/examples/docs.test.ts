import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, posix } from "node:path";
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
  "examples/sessions.ts": "docs/sessions-and-budgets.md",
  "examples/schedule.ts": "docs/schedules.md",
  "examples/reminder.ts": "docs/waits.md",
  "examples/order.ts": "docs/waits.md",
  "examples/evals.ts": "docs/evals.md",
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

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats get -1, -2. */
const anchorsOf = (markdown: string) => {
  const seen = new Map<string, number>();
  return new Set(
    outsideFences(markdown)
      .flatMap((line) => /^#{1,6} (.*)$/.exec(line)?.[1] ?? [])
      .map((heading) => {
        const slug = heading
          .toLowerCase()
          .replace(/[^\p{L}\p{N}\s_-]/gu, "")
          .replace(/\s/g, "-");
        const n = seen.get(slug) ?? 0;
        seen.set(slug, n + 1);
        return n ? `${slug}-${n}` : slug;
      }),
  );
};
/** A page's lines outside fenced code. */
const outsideFences = (markdown: string) => {
  let fenced = false;
  return markdown.split("\n").filter((line) => {
    if (line.startsWith(FENCE)) fenced = !fenced;
    return !fenced && !line.startsWith(FENCE);
  });
};
/** A page's prose: outside fenced code, inline code emptied (a `](x)` in code is no link). */
const prose = (markdown: string) => outsideFences(markdown).map((line) => line.replace(/`[^`]*`/g, "``"));
/** Each relative link and image of a page, as the path from the package root and the anchor. */
const linksOf = (doc: string) =>
  [
    ...prose(read(doc))
      .join("\n")
      .matchAll(/\]\(([^)\s]+)\)/g),
  ]
    .map((m) => m[1] ?? "")
    .filter((target) => !/^[a-z][a-z+.-]*:/i.test(target))
    .map((target) => {
      const [path = "", anchor] = target.split("#");
      return { doc, target, path: path ? posix.normalize(posix.join(posix.dirname(doc), path)) : doc, anchor };
    });

describe("the README's and the guides' links", () => {
  const links = docs.flatMap(linksOf);

  it("reach files that exist and headings they have", () => {
    const broken = links.flatMap(({ doc, target, path, anchor }) => {
      if (!existsSync(join(root, path))) return [`${doc}: ${target} (no such file)`];
      if (anchor !== undefined && !(path.endsWith(".md") && anchorsOf(read(path)).has(anchor)))
        return [`${doc}: ${target} (no such heading)`];
      return [];
    });
    expect(broken).toEqual([]);
    expect(links.length).toBeGreaterThan(40);
  });

  it("link every guide from the README's map, and the README from every guide", () => {
    const fromReadme = new Set(links.filter((l) => l.doc === "README.md").map((l) => l.path));
    expect(docs.filter((doc) => doc !== "README.md" && !fromReadme.has(doc))).toEqual([]);
    const backHome = docs.filter((doc) => doc !== "README.md" && !linksOf(doc).some((l) => l.path === "README.md"));
    expect(backHome).toEqual([]);
  });

  it("show every screenshot in docs/images", () => {
    const shownImages = new Set(links.map((l) => l.path));
    const images = readdirSync(join(root, "docs/images")).map((f) => `docs/images/${f}`);
    expect(images.filter((image) => !shownImages.has(image))).toEqual([]);
  });

  it("reach only files the package ships, so the installed README's links work too", () => {
    const { files } = JSON.parse(read("package.json")) as { files: string[] };
    const shipped = (path: string) =>
      files.some((pattern) =>
        pattern.includes("*")
          ? new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`).test(path)
          : path === pattern || path.startsWith(`${pattern}/`),
      );
    expect(docs.filter((doc) => !shipped(doc))).toEqual([]);
    expect([...new Set(links.map((l) => l.path).filter((path) => !shipped(path)))]).toEqual([]);
  });
});

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../src/cli/packageRoot.ts";

const root = packageRoot();
const FENCE = "```";
const readme = readFileSync(join(root, "README.md"), "utf8");
const blocks = (lang: string) =>
  [...readme.matchAll(new RegExp(`${FENCE}${lang}\\n([\\s\\S]*?)\\n${FENCE}`, "g"))].map((m) => m[1]);

describe("README.md", () => {
  it("opens with the two commands for a fresh machine", () => {
    expect(
      blocks("sh")[0]
        ?.split("\n")
        .map((l) => l.replace(/\s+#.*$/, "")),
    ).toEqual(["npm ci && npm run demo", "npm test"]);
  });

  it("shows examples/quickstart.ts as it is", () => {
    expect(blocks("ts")).toContain(readFileSync(join(root, "examples/quickstart.ts"), "utf8").trimEnd());
  });

  it("says how to install the package from a clone, naming the tarball npm pack writes", () => {
    const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
    const install = blocks("sh")[1]
      ?.split("\n")
      .map((l) => l.replace(/\s+#.*$/, ""));
    expect(install).toEqual([
      "git clone <this repository> loom && cd loom && npm ci",
      "npm pack",
      `cd ../my-app && npm install ../loom/loom-agent-${version}.tgz`,
    ]);
    // What scripts/test-package.sh does: pack, then install the tarball in a fresh project.
    const script = readFileSync(join(root, "scripts/test-package.sh"), "utf8");
    expect(script).toMatch(/^npm pack /m);
    expect(script).toContain('npm install --no-audit --no-fund --loglevel=error "$tarball"');
  });

  it("sends readers who contribute to CONTRIBUTING.md, which exists", () => {
    expect(readme).toContain("[CONTRIBUTING.md](CONTRIBUTING.md)");
    expect(readFileSync(join(root, "CONTRIBUTING.md"), "utf8")).toMatch(/as root/);
  });
});

describe("CHANGELOG.md", () => {
  it("heads its first section with the version package.json packs, so the tarball's changelog names itself", () => {
    const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
    const changelog = readFileSync(join(root, "CHANGELOG.md"), "utf8");
    const first = /^## (.+)$/m.exec(changelog)?.[1];
    expect(first?.split(" ")[0]).toBe(version);
  });
});

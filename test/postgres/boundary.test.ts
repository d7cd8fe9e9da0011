import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? sources(join(dir, d.name)) : d.name.endsWith(".ts") ? [join(dir, d.name)] : [],
  );
}

describe("the loom/postgres boundary", () => {
  it("keeps pg out of every module outside src/postgres*, so the embedded default never loads it", () => {
    const importers = sources(join(root, "src"))
      .map((file) => relative(root, file))
      .filter((file) => !file.startsWith("src/postgres"))
      .filter((file) => /from\s+["']pg["']|import\(\s*["']pg["']\s*\)/.test(readFileSync(join(root, file), "utf8")));
    expect(importers).toEqual([]);
  });

  it("is a subpath export, with pg an optional peer", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    expect(JSON.stringify(pkg.exports["./postgres"])).toMatch(/\/postgres\.(ts|js)"/);
    expect(pkg.peerDependenciesMeta.pg).toEqual({ optional: true });
  });
});

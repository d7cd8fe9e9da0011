import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The read layer's place: src/read is read by the CLI and the viewer and imports neither; the
 * viewer imports nothing from the CLI (the CLI may start the viewer, `loom view`).
 */

const SRC = resolve(import.meta.dirname, "../../src");

/** The folders under src/ that the files of `folder` import from (relative imports only). */
function importsOf(folder: string): { file: string; target: string }[] {
  const out: { file: string; target: string }[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts")) {
        for (const m of readFileSync(path, "utf8").matchAll(/(?:from|import)\s*\(?\s*"(\.[^"]+)"/g)) {
          const target = relative(SRC, resolve(dirname(path), m[1] as string));
          out.push({ file: relative(SRC, path), target });
        }
      }
    }
  };
  walk(join(SRC, folder));
  return out;
}

const into = (imports: { file: string; target: string }[], folder: string) =>
  imports.filter((i) => i.target === folder || i.target.startsWith(`${folder}/`)).map((i) => `${i.file} → ${i.target}`);

describe("src/read's place", () => {
  it("src/viewer imports nothing from src/cli", () => {
    expect(into(importsOf("viewer"), "cli")).toEqual([]);
  });

  it("src/read imports nothing from src/cli or src/viewer", () => {
    const imports = importsOf("read");
    expect(imports.length).toBeGreaterThan(0);
    expect([...into(imports, "cli"), ...into(imports, "viewer")]).toEqual([]);
  });
});

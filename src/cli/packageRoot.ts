import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The folder of Loom's own package.json, found from this file's location (src/cli or, once
 * built, dist/cli): the demo reads the package's files and spawns its worker from there.
 */
export function packageRoot(from: string = import.meta.url): string {
  let dir = dirname(fileURLToPath(from));
  for (;;) {
    const manifest = join(dir, "package.json");
    if (
      existsSync(manifest) &&
      (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "loom-agent"
    ) {
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json of "loom-agent" above ${fileURLToPath(from)}`);
    dir = parent;
  }
}

/** The version in Loom's package.json. */
export const packageVersion = (): string =>
  (JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version: string }).version;

/**
 * How to run a sibling module of this one in a child process: the file (same extension as this
 * one: `.ts` from the sources, `.js` once built) and the `node` flags it needs (`--import tsx`
 * for TypeScript sources; run with the package root as cwd so `tsx` resolves).
 */
export function siblingModule(name: string, from: string = import.meta.url): { file: string; execArgv: string[] } {
  const self = fileURLToPath(from);
  const ext = self.endsWith(".ts") ? ".ts" : ".js";
  return { file: join(dirname(self), `${name}${ext}`), execArgv: ext === ".ts" ? ["--import", "tsx"] : [] };
}

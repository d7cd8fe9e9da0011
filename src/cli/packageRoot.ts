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

/**
 * Loom runs from a clone of its repository (its TypeScript sources beside it, `npm run loom`
 * defined), not from a package installed in someone's project.
 */
export function runsFromClone(root: string = packageRoot()): boolean {
  if (!existsSync(join(root, "src", "cli", "bin.ts"))) return false;
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts?: Record<string, string> };
  return typeof manifest.scripts?.loom === "string";
}

/**
 * The command line to give a user for `loom <args>` where they are: `npm run loom -- <args>` in
 * a clone, `npx loom <args>` where Loom is installed.
 *
 * @example
 * loomCommand("runs --db app.db"); // "npx loom runs --db app.db" in an installed package
 */
export const loomCommand = (args: string, root?: string): string =>
  `${runsFromClone(root) ? "npm run loom --" : "npx loom"} ${args}`;

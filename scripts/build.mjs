// Builds the package as users receive it: ESM JavaScript and .d.ts in dist/ (no source maps:
// the sources are not shipped, and tsc's output keeps their lines and names).
// tsc rewrites the sources' relative ".ts" import specifiers to ".js" in the JavaScript it
// emits but not in declaration files, so this rewrites those too: a consumer's TypeScript
// resolves "./x.js" to "./x.d.ts".
import { execFileSync } from "node:child_process";
import { chmodSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const dist = join(root, "dist");
rmSync(dist, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [join(root, "node_modules/typescript/bin/tsc"), "-p", join(root, "tsconfig.build.json")],
  {
    stdio: "inherit",
  },
);

const relativeTs = /((?:from|import)\s*\(?\s*["'])(\.{1,2}\/[^"']+)\.ts(["'])/g;
let rewritten = 0;
for (const entry of readdirSync(dist, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !entry.name.endsWith(".d.ts")) continue;
  const file = join(entry.parentPath, entry.name);
  const text = readFileSync(file, "utf8");
  const next = text.replace(relativeTs, "$1$2.js$3");
  if (next !== text) {
    writeFileSync(file, next);
    rewritten++;
  }
}
chmodSync(join(dist, "cli/bin.js"), 0o755);
console.log(`built dist/ (${rewritten} declaration files' specifiers rewritten to .js)`);

import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const src = (file: string) => fileURLToPath(new URL(`./src/${file}`, import.meta.url));

export default defineConfig({
  // Inside the repository "loom-agent" is the sources (as in tsconfig.json's paths); users get dist/.
  resolve: {
    alias: [
      { find: /^loom-agent$/, replacement: src("index.ts") },
      { find: /^loom-agent\/ai-sdk$/, replacement: src("ai-sdk.ts") },
      { find: /^loom-agent\/journal$/, replacement: src("journal.ts") },
      { find: /^loom-agent\/postgres$/, replacement: src("postgres.ts") },
      { find: /^loom-agent\/viewer$/, replacement: src("viewer.ts") },
      { find: /^loom-agent\/mcp$/, replacement: src("mcp.ts") },
    ],
  },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});

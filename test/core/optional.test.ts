import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { isMissingDependencyError, loadOptional } from "../../src/core/optional.ts";

describe("optional dependencies", () => {
  it("names the package to install when a feature's optional dependency is missing", () => {
    let error: unknown;
    try {
      loadOptional("loom-no-such-package", "The test feature");
    } catch (e) {
      error = e;
    }
    expect(isMissingDependencyError(error)).toBe(true);
    expect((error as Error).message).toBe(
      'The test feature needs the package "loom-no-such-package", which is not installed: run `npm install loom-no-such-package` in your project.',
    );
  });

  it("importing loom loads neither better-sqlite3 nor pg; opening a SQLite journal loads better-sqlite3", () => {
    const script = `
      import { createRequire } from "node:module";
      const loaded = () => Object.keys(createRequire(import.meta.url).cache).filter((k) => /node_modules[\\\\/](better-sqlite3|pg)[\\\\/]/.test(k));
      const loom = await import("./src/index.ts");
      const journal = loom.createJournal({ store: loom.memoryStore() });
      const before = loaded().length;
      loom.openSqliteJournal(":memory:");
      console.log(JSON.stringify({ before, after: loaded().length > 0 }));`;
    const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      encoding: "utf8",
    });
    expect(JSON.parse(out)).toEqual({ before: 0, after: true });
  });
});

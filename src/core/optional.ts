import { createRequire } from "node:module";
import { errorGuard, LoomError } from "./errors.ts";

/** A feature needs a package that is an optional dependency of Loom and is not installed. */
export class MissingDependencyError extends LoomError {
  readonly packageName: string;
  constructor(packageName: string, feature: string, options?: { cause?: unknown }) {
    super(
      "missingDependency",
      `${feature} needs the package "${packageName}", which is not installed: run \`npm install ${packageName}\` in your project.`,
      options,
    );
    this.packageName = packageName;
  }
}

/** True when `e` is a `MissingDependencyError` (its `packageName` says what to install). */
export const isMissingDependencyError = errorGuard(MissingDependencyError, { codes: ["missingDependency"] });

const require = createRequire(import.meta.url);

/**
 * Loads an optional dependency when a feature first needs it, so `import "loom-agent"` never loads
 * (or requires) better-sqlite3, pg or the AI SDK. Throws `MissingDependencyError` naming the
 * package to install.
 *
 * @example
 * const Database = loadOptional<typeof import("better-sqlite3")>("better-sqlite3", "the SQLite journal");
 */
export function loadOptional<T>(packageName: string, feature: string): T {
  try {
    return require(packageName) as T;
  } catch (e) {
    if ((e as { code?: string }).code === "MODULE_NOT_FOUND" && String((e as Error).message).includes(packageName)) {
      throw new MissingDependencyError(packageName, feature, { cause: e });
    }
    throw e;
  }
}

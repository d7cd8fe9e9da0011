import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The repository root: child processes run there, so `--import tsx` and relative imports resolve. */
export const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

export interface Worker {
  readonly child: ChildProcess;
  /** stdout lines so far (complete lines only). */
  readonly lines: string[];
  /** stderr so far, for failure messages. */
  readonly stderr: () => string;
  /** Resolves when the process has exited: its exit code, or the signal that killed it. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves when a stdout line satisfies `match` (checked on lines already read too). */
  waitFor(match: (line: string) => boolean, what: string, ms?: number): Promise<string>;
}

/**
 * Starts `node --import tsx <script> ...args` in the repo root. `node` is the process that does
 * the work (no wrapper), so a SIGKILL sent to `child` kills it where it stands.
 */
export function startWorker(script: string, args: readonly string[]): Worker {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  const waiters: { match: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  let rest = "";
  let errors = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    const parts = (rest + chunk.toString()).split("\n");
    rest = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      for (let i = waiters.length - 1; i >= 0; i--) {
        const w = waiters[i]!;
        if (w.match(line)) {
          waiters.splice(i, 1);
          w.resolve(line);
        }
      }
    }
  });
  child.stderr!.on("data", (chunk: Buffer) => {
    errors += chunk.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    lines,
    stderr: () => errors,
    exited,
    waitFor(match, what, ms = 20_000) {
      const seen = lines.find(match);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}; stderr: ${errors}`)), ms);
        const done = (line: string) => {
          clearTimeout(timer);
          resolve(line);
        };
        waiters.push({ match, resolve: done });
        void exited.then(({ code, signal }) => {
          clearTimeout(timer);
          reject(new Error(`the worker exited (${signal ?? code}) before ${what}; stderr: ${errors}`));
        });
      });
    },
  };
}

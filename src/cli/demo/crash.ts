import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { CliError } from "../io.ts";
import { siblingModule } from "../packageRoot.ts";
import type { Progress } from "../progress.ts";
import type { WorkerMessage } from "./worker.ts";

export interface CrashedWorker {
  readonly pid: number;
  readonly signal: NodeJS.Signals;
  /** The tool step that was running when the worker was killed. */
  readonly stepId: string;
  readonly ms: number;
}

/**
 * Runs a new demo run in a child process (`node [--import tsx] worker`, cwd the package root)
 * and kills it with SIGKILL at its crash point, while the tool of turn `crashAt` runs: its frame
 * is started in the journal and will never be completed by this process.
 */
export async function runWorkerAndKill(options: {
  readonly root: string;
  readonly db: string;
  readonly runId: string;
  readonly turns: number;
  readonly crashAt: number;
  readonly onProgress: (p: Progress) => void;
}): Promise<CrashedWorker> {
  const started = Date.now();
  const worker = siblingModule("worker", import.meta.url);
  const args = ["--db", options.db, "--run", options.runId, "--turns", String(options.turns)];
  const child = spawn(
    process.execPath,
    [...worker.execArgv, worker.file, ...args, "--crash-at", String(options.crashAt)],
    {
      cwd: options.root,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  let crashPoint: { stepId: string; pid: number } | undefined;
  let failed: Extract<WorkerMessage, { type: "error" }> | undefined;
  createInterface({ input: child.stdout }).on("line", (line) => {
    let message: WorkerMessage;
    try {
      message = JSON.parse(line) as WorkerMessage;
    } catch {
      return; // not ours
    }
    if (message.type === "progress") options.onProgress(message);
    else if (message.type === "error") failed = message;
    else if (message.type === "crash-point" && !crashPoint) {
      crashPoint = { stepId: message.stepId, pid: message.pid };
      child.kill("SIGKILL");
    }
  });
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (c, s) => resolve([c, s])); // after stdout is read: its last line may be the error
  });
  if (failed && !crashPoint) {
    throw new CliError(failed.code ?? "demoWorker", `the demo's worker failed: ${failed.message}`);
  }
  if (!crashPoint || signal !== "SIGKILL") {
    const why = signal ? `was killed by ${signal}` : `exited with code ${code}`;
    throw new CliError(
      "demoWorker",
      `the demo's worker ${why} before its crash point${stderr ? `: ${stderr.trim().split("\n").slice(-3).join(" | ")}` : ""}`,
    );
  }
  return { pid: crashPoint.pid, signal, stepId: crashPoint.stepId, ms: Date.now() - started };
}

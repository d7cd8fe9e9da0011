/**
 * The demo's worker: a child process that runs a demo run and reports its progress on stdout,
 * one JSON line per journal append. At its crash point (the tool of turn `--crash-at`) it says
 * so and waits there, mid-step, for the parent to kill it.
 *
 *   node --import tsx src/cli/demo/worker.ts --db <file> --run <runId> --turns <n> --crash-at <turn>
 */
import { parseArgs } from "node:util";
import { isLoomError, openSqliteJournal } from "../../index.ts";
import { parseFrameId } from "../../journal.ts";
import { packageRoot } from "../packageRoot.ts";
import { runDemoSession } from "./session.ts";

/** A message of the worker to its parent. */
export type WorkerMessage =
  | { readonly type: "progress"; readonly turn: number; readonly entries: number; readonly bytes: number }
  | { readonly type: "crash-point"; readonly stepId: string; readonly pid: number }
  | { readonly type: "done" }
  /** The worker failed: its own error, passed through to the user (a MissingDependencyError names what to install). */
  | { readonly type: "error"; readonly name: string; readonly code: string | undefined; readonly message: string };

const send = (message: WorkerMessage) => process.stdout.write(`${JSON.stringify(message)}\n`);

const { values } = parseArgs({
  options: {
    db: { type: "string" },
    run: { type: "string" },
    turns: { type: "string" },
    "crash-at": { type: "string" },
  },
});
if (!values.db || !values.run || !values.turns) {
  process.stderr.write("demo worker: --db, --run and --turns are required\n");
  process.exit(2);
}
const crashAt = values["crash-at"] === undefined ? undefined : Number(values["crash-at"]);
try {
  const journal = openSqliteJournal(values.db);
  await runDemoSession({
    journal,
    runId: values.run,
    root: packageRoot(),
    turns: Number(values.turns),
    onProgress: (p) => send({ type: "progress", ...p }),
    async beforeTool(stepId) {
      if (crashAt === undefined || parseFrameId(stepId)?.turn !== crashAt) return;
      send({ type: "crash-point", stepId, pid: process.pid });
      await new Promise((resolve) => setTimeout(resolve, 60_000)); // the parent kills us before this ends
    },
  });
  send({ type: "done" });
  await journal.close();
} catch (e) {
  const error = e instanceof Error ? e : new Error(String(e));
  const code = isLoomError(error) ? error.code : undefined;
  send({ type: "error", name: error.name, code, message: error.message });
  process.stderr.write(`${error.stack ?? error.message}\n`);
  process.exitCode = 1;
}

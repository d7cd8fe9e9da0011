import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll } from "vitest";
import { runDemoSession } from "../../src/cli/demo/session.ts";
import { type CliIo, main } from "../../src/cli/main.ts";
import { packageRoot } from "../../src/cli/packageRoot.ts";
import { openSqliteJournal, readJournal } from "../../src/index.ts";

/** A temp folder removed after the file's tests. */
export function tempDir(prefix = "loom-cli-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** An io whose streams are buffers: what a command printed, and an exit code. */
export function captureIo(cwd: string, extra: Partial<CliIo> = {}) {
  let out = "";
  let err = "";
  const io: CliIo = {
    stdout: { write: (text: string) => (out += text) },
    stderr: { write: (text: string) => (err += text) },
    cwd,
    ...extra,
  };
  return { io, out: () => out, err: () => err };
}

/** Runs `loom <argv>` in-process. */
export async function loom(cwd: string, argv: string[], extra: Partial<CliIo> = {}) {
  const captured = captureIo(cwd, extra);
  const code = await main(argv, captured.io);
  return { code, stdout: captured.out(), stderr: captured.err() };
}

/** A stdin the test types into. */
export const typedStdin = () => Object.assign(new PassThrough(), { isTTY: false as const });

/**
 * A journal file with a completed demo run of `turns` turns (run in-process, no crash) and a
 * "crashed" copy of it: the completed run's entries up to the start of turn `crashAt`'s tool, as a
 * process killed mid-tool leaves them.
 */
export async function demoJournal(dir: string, turns = 6, crashAt = 3) {
  const db = join(dir, "loom.db");
  const journal = openSqliteJournal(db);
  try {
    await runDemoSession({ journal, runId: "done-1", root: packageRoot(), turns });
    const entries = await readJournal(journal, "done-1");
    const cut = entries.findIndex(
      (e) => e.type === "frame.started" && e.data.frameId === `loom-demo#turn:${crashAt}:tool:0`,
    );
    await journal.store.append(
      "crashed-1",
      entries.slice(0, cut + 1).map(({ type, data }) => ({ type, data }) as never),
      { expectedVersion: 0 },
    );
  } finally {
    await journal.close();
  }
  return db;
}

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

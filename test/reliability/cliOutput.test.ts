import { connect } from "node:net";
import { beforeAll, describe, expect, it } from "vitest";
import { exposureWarning, isLoopback } from "../../src/cli/inspectServer.ts";
import { main } from "../../src/cli/main.ts";
import { agentLoop$, openSqliteJournal, scriptedModel } from "../../src/index.ts";
import { captureIo, demoJournal, freePort, loom, tempDir, typedStdin } from "../cli/support.ts";

/**
 * What the CLI shows and to whom: the inspector (which serves a run's tool calls) listens on
 * loopback unless told otherwise, and ids read from a journal cannot drive the terminal.
 */

const dir = tempDir("loom-cli-output-");
let db = "";
beforeAll(async () => {
  db = await demoJournal(dir, 2, 1);
});

/** Connects to host:port: "connected", or the error code (ECONNREFUSED). */
const reach = (host: string, port: number) =>
  new Promise<string>((resolve) => {
    const socket = connect({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve("connected");
    });
    socket.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
  });

/** Starts `loom inspect … --wait` and returns once it serves; `stop()` ends it (exit code). */
async function serving(args: string[]) {
  const stdin = typedStdin();
  const captured = captureIo(dir, { stdin });
  const exit = main(["inspect", "done-1", "--db", db, "--once", "--wait", ...args], captured.io);
  const until = Date.now() + 10_000;
  while (!captured.out().includes("press Enter")) {
    if (Date.now() > until) throw new Error(`inspect did not start: ${captured.err()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return {
    captured,
    stop: async () => {
      stdin.write("\n");
      return exit;
    },
  };
}

describe("loom inspect listens on loopback", () => {
  it("binds 127.0.0.1 by default: another address of this machine (127.0.0.2) is refused", async () => {
    const port = await freePort();
    const run = await serving(["--port", String(port)]);
    try {
      expect(await reach("127.0.0.1", port)).toBe("connected");
      expect(await reach("127.0.0.2", port)).toBe("ECONNREFUSED");
      expect(run.captured.err()).toBe("");
    } finally {
      expect(await run.stop()).toBe(0);
    }
  });

  it("--host names the address it listens on (and only that one)", async () => {
    const port = await freePort();
    const run = await serving(["--port", String(port), "--host", "127.0.0.2"]);
    try {
      expect(run.captured.out()).toContain(`inspector: http://127.0.0.2:${port}`);
      expect(await reach("127.0.0.2", port)).toBe("connected");
      expect(await reach("127.0.0.1", port)).toBe("ECONNREFUSED");
      expect(run.captured.err()).toBe(""); // loopback: no warning
    } finally {
      expect(await run.stop()).toBe(0);
    }
  });

  it("without --port, listens on a free port and prints an address that carries the server's token", async () => {
    const run = await serving([]);
    try {
      const printed = /inspector: http:\/\/127\.0\.0\.1:(\d+)\/\?token=([\w-]+) /.exec(run.captured.out());
      expect(printed?.[2]).toMatch(/^[\w-]{32}$/);
      const port = Number(printed?.[1]);
      expect(await reach("127.0.0.1", port)).toBe("connected");
      // The page itself is served only with the token.
      expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(403);
      expect((await fetch(`http://127.0.0.1:${port}/?token=${printed?.[2]}`)).status).toBe(200);
    } finally {
      expect(await run.stop()).toBe(0);
    }
  });

  it("warns for a host other machines can reach, never for loopback", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"])
      expect(isLoopback(host) && exposureWarning(host, 8080)).toBe(undefined);
    for (const host of ["0.0.0.0", "::", "192.168.1.20", "example.com", "128.0.0.1"]) {
      expect(isLoopback(host)).toBe(false);
      expect(exposureWarning(host, 8080)).toMatch(
        /^warning: the inspector listens on .*:8080, which other machines may reach/,
      );
    }
  });

  it("an address this machine does not have is a clear error (exit 1), not a crash", async () => {
    const port = await freePort();
    const r = await loom(dir, [
      "inspect",
      "done-1",
      "--db",
      db,
      "--once",
      "--no-wait",
      "--port",
      String(port),
      "--host",
      "192.0.2.1",
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^loom: --host 192\.0\.2\.1: not an address of this machine/);
    expect(r.stderr).not.toContain("warning"); // nothing was served
  });
});

describe("ids from a journal are escaped in text output", () => {
  // Loop ids are validated (letters, digits, _ . : -) and run ids hold no control characters
  // (RUN_ID_RULE), but a run id may hold a bidi override, and a tool name (the model's) anything.
  const loopId = "shop";
  const runId = "run\u202eenil ekaf";
  let evil = "";
  beforeAll(async () => {
    evil = `${dir}/evil.db`;
    const journal = openSqliteJournal(evil);
    try {
      const loop = agentLoop$({
        id: loopId,
        model: scriptedModel([
          { toolCalls: [{ id: "1", name: "echo\u001b[2J\nfake line", input: {} }] },
          { content: "ok", toolCalls: [] },
        ]),
        tools: { "echo\u001b[2J\nfake line": { description: "echo", execute: () => ({ ok: true }) } },
      });
      await loop.run({ runId, journal, input: "hi" });
    } finally {
      await journal.close();
    }
  });
  const raw = /(?!\n)[\p{Cc}\u202e]/u;

  it.each([
    ["runs", () => ["runs", "--db", evil]],
    ["log", () => ["log", runId, "--db", evil]],
    ["log --mode lean", () => ["log", runId, "--mode", "lean", "--db", evil]],
    ["show", () => ["show", `${loopId}#turn:0:tool:0`, "--db", evil]],
    ["show (unknown step)", () => ["show", "step\u001b[2J\u202e", "--db", evil]],
    ["resume", () => ["resume", runId, "--db", evil]],
  ])("loom %s: no control character reaches the terminal; the escapes show instead", async (_, argv) => {
    const r = await loom(dir, argv());
    const printed = r.stdout + r.stderr;
    expect(printed).not.toMatch(raw);
    expect(printed).not.toContain("\nfake line");
    expect(printed).toMatch(/run\\u202eenil ekaf|echo\\x1b\[2J\\nfake line|step\\x1b\[2J\\u202e/);
  });

  it("--json keeps the ids exact (JSON escapes them its own way)", async () => {
    const r = await loom(dir, ["runs", "--json", "--db", evil]);
    expect(JSON.parse(r.stdout)[0].runId).toBe(runId);
  });
});

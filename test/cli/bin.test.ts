import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.ts";
import { packageRoot } from "../../src/cli/packageRoot.ts";
import { captureIo, loom, tempDir } from "./support.ts";

const root = packageRoot();
const dir = tempDir();

/** `node --import tsx src/cli/bin.ts …` as a real process, from the package root. */
const bin = (...args: string[]) =>
  spawnSync(process.execPath, ["--import", "tsx", join(root, "src/cli/bin.ts"), ...args], {
    cwd: root,
    encoding: "utf8",
  });

describe("the loom process", () => {
  it("exits 0 for --help, 2 for a usage error, 1 for a failure, each error on one line", () => {
    const help = bin("log", "--help");
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: loom log \[options\] <runId>/);
    expect(help.stdout).toContain("--db <file>");

    const usage = bin("log");
    expect(usage.status).toBe(2);
    expect(usage.stderr).toBe("loom: missing required argument 'runId' (see --help)\n");

    const failure = bin("runs", "--db", join(dir, "none.db"));
    expect(failure.status).toBe(1);
    expect(failure.stderr).toBe(
      `loom: no journal at ${join(dir, "none.db")}: run \`npm run demo\` to make one, or pass --db <file> (the SQLite file your program journals to)\n`,
    );
  });

  it("prints the stack and the code with --verbose", async () => {
    const { code, stderr } = await loom(dir, ["runs", "--db", "none.db", "--verbose"]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/^loom: CliError: no journal at .*\n {4}at /);
    expect(stderr).toContain("code: noJournal");
  });
});

describe("usage errors exit 2", () => {
  it.each([
    [[]],
    [["nope"]],
    [["runs", "--bogus"]],
    [["show"]],
    [["compact", "r"]],
    [["compact", "r", "--keep-turns", "x"]],
    [["inspect", "r", "--port", "0"]],
    [["machine", "agentLoop"]],
    [["log", "r", "--mode", "medium"]],
  ])("loom %j", async (argv) => {
    const { code, stderr } = await loom(dir, argv);
    expect(code).toBe(2);
    if (argv.length > 0) expect(stderr.trim().split("\n")).toHaveLength(1);
  });

  it("prints help for every command, with --db where it reads a journal, and exits 0", async () => {
    for (const command of ["demo", "runs", "log", "diff", "show", "resume", "compact", "inspect", "machine"]) {
      const captured = captureIo(dir);
      expect(await main([command, "--help"], captured.io)).toBe(0);
      expect(captured.out()).toContain(`Usage: loom ${command}`);
      if (command === "machine") expect(captured.out()).not.toContain("--db");
      else expect(captured.out()).toContain("--db <file>");
    }
  });
});

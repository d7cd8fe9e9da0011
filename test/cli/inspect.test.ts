import { createServer } from "node:net";
import { beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { StateValue } from "xstate";
import { main } from "../../src/cli/main.ts";
import { captureIo, demoJournal, freePort, loom, tempDir, typedStdin } from "./support.ts";

const dir = tempDir();
let db = "";
beforeAll(async () => {
  db = await demoJournal(dir, 4, 2);
});

/** A state value as a dotted path: `running.dispatching`. */
const stateOf = (value: StateValue): string =>
  typeof value === "string"
    ? value
    : Object.entries(value)
        .map(([parent, child]) => `${parent}.${stateOf(child as StateValue)}`)
        .join();

const until = async (ok: () => boolean, what: string) => {
  const end = Date.now() + 10_000;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

interface Relayed {
  type: string;
  name?: string;
  sessionId: string;
  rootId?: string;
  snapshot?: { value?: StateValue };
  event?: { type: string; calls?: unknown[] };
}

describe("loom inspect", () => {
  it("streams the replayed run through the inspector server to a websocket client (--once)", async () => {
    const port = await freePort();
    const stdin = typedStdin();
    const captured = captureIo(dir, { stdin });
    const exit = main(["inspect", "done-1", "--db", db, "--once", "--wait", "--port", String(port)], captured.io);
    await until(() => captured.out().includes("press Enter"), "the server");
    const printed = /inspector: (http:\/\/\S+) \(the Stately inspector, fed by (ws:\/\/\S+)\)/.exec(captured.out());
    expect(printed?.[1]).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/\\?token=[\\w-]{32}$`));
    expect(printed?.[2]).toBe(printed?.[1]?.replace("http:", "ws:"));
    const client = new WebSocket(printed?.[2] ?? "");
    const received: Relayed[] = [];
    client.on("message", (data) => received.push(JSON.parse(String(data)) as Relayed));
    await new Promise((resolve, reject) => client.once("open", resolve).once("error", reject));
    try {
      stdin.write("\n");
      expect(await exit).toBe(0);
      const line = /(\d+)\/(\d+) inspection events delivered; 4\/4 tool results match the journal/.exec(captured.out());
      expect(line?.[1]).toBe(line?.[2]);
      await until(() => received.length >= Number(line?.[2]), "the events");
    } finally {
      client.close();
    }
    const root = received.find((e) => e.type === "@xstate.actor" && e.name === "agentLoop");
    expect(root).toBeDefined();
    const walk: string[] = [];
    for (const e of received) {
      if (e.type !== "@xstate.snapshot" || e.sessionId !== root?.sessionId || !e.snapshot?.value) continue;
      const value = stateOf(e.snapshot.value);
      if (walk.at(-1) !== value) walk.push(value);
    }
    const turn = ["running.callingModel", "running.dispatching"];
    expect(walk).toEqual([
      "starting",
      ...turn,
      ...turn,
      ...turn,
      ...turn,
      "running.callingModel",
      "finishing",
      "completed",
    ]);
    // The calls that cannot wait (these four) go to the loop's one plainCalls actor: no actor a call.
    const plainCalls = received.find((e) => e.type === "@xstate.actor" && e.name === "plainCalls");
    expect(plainCalls).toBeDefined();
    const told = received.filter(
      (e) => e.type === "@xstate.event" && e.sessionId === plainCalls?.sessionId && e.event?.type === "CALLS.RUN",
    );
    expect(told.flatMap((e) => e.event?.calls ?? [])).toHaveLength(4);
    expect(received.filter((e) => e.type === "@xstate.actor" && e.name?.startsWith("call:"))).toHaveLength(0);
  });

  it("ends the replay of a crashed run where its recording ends, every recorded result matching", async () => {
    const port = await freePort();
    const { code, stdout } = await loom(dir, [
      "inspect",
      "crashed-1",
      "--db",
      db,
      "--once",
      "--no-wait",
      "--port",
      String(port),
    ]);
    expect(code).toBe(0);
    expect(stdout).toMatch(
      /replayed run crashed-1: 3 model responses, ended interrupted \(the recording ends here\); (\d+)\/\1 inspection events delivered; 2\/2 tool results match the journal/,
    );
  });

  it("fails in one line when the port is taken", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, resolve));
    const { port } = taken.address() as { port: number };
    try {
      const { code, stderr } = await loom(dir, ["inspect", "done-1", "--db", db, "--once", "--port", String(port)]);
      expect(code).toBe(1);
      expect(stderr).toBe(`loom: port ${port} on 127.0.0.1 is in use (another \`loom inspect\`?); pass --port <n>\n`);
    } finally {
      taken.close();
    }
  });
});

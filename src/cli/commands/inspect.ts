import { createInterface } from "node:readline";
import type { Command } from "commander";
import type { InspectionEvent } from "xstate";
import { rebuildToolCallLog } from "../../index.ts";
import { foldEntries, hydrateArchived } from "../../journal.ts";
import { dbPath, readRun, sqliteSource, withJournal } from "../db.ts";
import { count, int, printable } from "../format.ts";
import { CliError, type CliIo, println } from "../io.ts";
import { type CommonOptions, integerOption, portOption, withCodecKeys, withCommon } from "../options.ts";
import { type ReplayResult, replayRun } from "../replay.ts";

interface InspectOptions extends CommonOptions {
  readonly port?: number;
  readonly host: string;
  readonly once?: boolean;
  readonly wait?: boolean;
  readonly pace: number;
  readonly open?: boolean;
}

/** The inspection events @statelyai/inspect forwards (it drops the others). */
const FORWARDED = new Set(["@xstate.actor", "@xstate.event", "@xstate.snapshot"]);

/** `loom inspect <runId>`: the recorded run replayed through the statecharts, served to the Stately inspector. */
export function registerInspect(program: Command, io: CliIo): void {
  withCodecKeys(withCommon(program.command("inspect")))
    .description(
      "replay a recorded run through the loop's statecharts (served from its journal: nothing is re-executed), its sub-agents' runs under their calls, and stream it to the Stately inspector through a server on 127.0.0.1 (--host to widen it) and a free port; open the address it prints, which carries the server's token (the page and its websocket refuse other origins, other hosts and requests without the token); exits 1 when the replay does not match the journal",
    )
    .argument("<runId>", "the run (see `loom runs`)")
    .option(
      "--port <n>",
      "port of the local inspector server, 1–65535 (http page + websocket); default: a free port",
      portOption,
    )
    .option(
      "--host <address>",
      "address the server listens on; anyone who reaches it sees the run's tool calls (a warning is printed unless it is loopback)",
      "127.0.0.1",
    )
    .option("--once", "replay once, deliver the events, and exit")
    .option("--wait", "wait for Enter before each replay (the default on a terminal): open the page first")
    .option("--no-wait", "replay at once")
    .option(
      "--pace <ms>",
      "pause before each recorded model response, to watch the run step by step",
      integerOption(0),
      0,
    )
    .option("--open", "open the inspector page in the default browser")
    .action(async (runId: string, options: InspectOptions) => {
      const path = dbPath(io, options.db);
      // Open (read-only) while the inspector serves: each replay reads archived and claim-checked outputs from it.
      await withJournal(sqliteSource(io, options), async (journal) => {
        const entries = await readRun(journal, runId, path);
        const state = foldEntries(entries);
        await hydrateArchived(journal, state);
        const lean = await rebuildToolCallLog(journal, runId, "lean");
        const { createWebSocketInspector, startInspectorServer, exposureWarning, WebSocket } = await loadInspect();
        const server = await startInspectorServer({
          host: options.host,
          port: options.port ?? 0,
          open: options.open === true,
        });
        const warning = exposureWarning(options.host, server.port);
        if (warning) println(io.stderr, `loom inspect: ${warning}`);
        const inspector = createWebSocketInspector({ url: server.url.ws, maxDeferredEvents: Number.MAX_SAFE_INTEGER });
        // A client of our own counts what the server relays: the replay's events have reached it when the counts match.
        const probe = new WebSocket(server.url.ws);
        let relayed = 0;
        let mismatch: string | undefined;
        probe.on("message", () => relayed++);
        try {
          await new Promise((resolve, reject) => probe.once("open", resolve).once("error", reject));
          println(io.stdout, `inspector: ${server.url.http} (the Stately inspector, fed by ${server.url.ws})`);
          const replay = async () => {
            println(io.stdout, `replaying run ${printable(runId)}…`);
            const before = relayed;
            let sent = 0;
            const result = await replayRun(journal, entries, state, lean, {
              paceMs: options.pace,
              inspect: (event: InspectionEvent) => {
                if (FORWARDED.has(event.type)) sent++;
                inspector.inspect.next?.(event);
              },
            });
            const reached = await delivered(() => relayed - before, sent);
            println(
              io.stdout,
              `replayed run ${printable(runId)}: ${count(result.turns, "model response")}, ended ${result.ended}; ${int(reached)}/${int(sent)} inspection events delivered; ${int(result.matching)}/${int(result.of)} tool results match the journal (lean digest)`,
            );
            // The sub-agents replayed under their calls, indented by depth.
            const runs: { runId: string; result: ReplayResult }[] = [{ runId, result }];
            const below = (r: ReplayResult, depth: number): void => {
              for (const sub of r.subRuns) {
                println(
                  io.stdout,
                  `${"  ".repeat(depth)}sub-agent run ${printable(sub.runId)}: ${count(sub.turns, "model response")}, ended ${sub.ended}; ${int(sub.matching)}/${int(sub.of)} tool results match`,
                );
                runs.push({ runId: sub.runId, result: sub });
                below(sub, depth + 1);
              }
            };
            below(result, 1);
            const off = runs.find((r) => r.result.matching !== r.result.of);
            if (off) {
              mismatch = `the replay of run ${printable(off.runId)} does not match its journal: ${int(off.result.matching)}/${int(off.result.of)} tool results match (the inspector shows a run that differs from the recorded one)`;
            }
          };
          const wait = options.wait ?? io.stdin?.isTTY === true;
          if (!wait) await replay();
          if (!options.once || wait) await serve(io, { wait, once: options.once === true, replay });
        } finally {
          probe.close();
          inspector.stop();
          await server.stop();
        }
        if (mismatch) throw new CliError("replayMismatch", mismatch);
      });
    });
}

/** Until Ctrl-C (or after one replay with --once): Enter replays the run when `wait` is on. */
async function serve(io: CliIo, options: { wait: boolean; once: boolean; replay: () => Promise<void> }) {
  const lines = options.wait && io.stdin ? createInterface({ input: io.stdin }) : undefined;
  println(
    io.stdout,
    options.wait
      ? `press Enter to replay the run${options.once ? "" : " (again and again)"}; Ctrl-C to stop`
      : "serving; Ctrl-C to stop",
  );
  try {
    await new Promise<void>((resolve, reject) => {
      if (io.signal?.aborted) return resolve();
      io.signal?.addEventListener("abort", () => resolve(), { once: true });
      let busy = Promise.resolve();
      lines?.on("line", () => {
        busy = busy.then(options.replay).then(() => (options.once ? resolve() : undefined), reject);
      });
      lines?.once("close", () => void busy.then(() => options.once && resolve()));
    });
  } finally {
    lines?.close();
  }
}

/** Waits until `count()` reaches `expected` (10 s at most); returns what it reached. */
async function delivered(count: () => number, expected: number): Promise<number> {
  const until = Date.now() + 10_000;
  while (count() < expected && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
  return count();
}

/** @statelyai/inspect and ws, loaded only by this command. */
async function loadInspect() {
  try {
    const [{ createWebSocketInspector }, { startInspectorServer, exposureWarning }, { WebSocket }] = await Promise.all([
      import("@statelyai/inspect"),
      import("../inspectServer.ts"),
      import("ws"),
    ]);
    return { createWebSocketInspector, startInspectorServer, exposureWarning, WebSocket };
  } catch (e) {
    throw new CliError(
      "inspectMissing",
      `loom inspect needs the packages @statelyai/inspect and ws (${(e as Error).message.split("\n")[0]}); install them: npm install @statelyai/inspect ws`,
    );
  }
}

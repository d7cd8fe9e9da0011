import type { Command } from "commander";
import { pollingSource } from "../../viewer/live.ts";
import { startViewer } from "../../viewer/server.ts";
import { dbPath, withJournal } from "../db.ts";
import { exposureWarning } from "../inspectServer.ts";
import { type CliIo, println } from "../io.ts";
import { type CommonOptions, integerOption, portOption, withCommon } from "../program.ts";

interface ViewOptions extends CommonOptions {
  readonly port: number;
  readonly host: string;
  readonly poll: number;
}

/** `loom view`: the journal's runs in a local web page, until Ctrl-C. */
export function registerView(program: Command, io: CliIo): void {
  withCommon(program.command("view"))
    .description(
      "serve a local web page of the journal's runs (works offline): runs by status, a run's timeline (live while it goes on), a step's verified output, and time travel: the full and lean tool-call logs and the statechart state at any entry",
    )
    .option("--port <n>", "port to listen on, 1–65535", portOption, 8090)
    .option(
      "--host <address>",
      "address to listen on; anyone who reaches it sees the runs' tool calls, inputs and outputs (a warning is printed unless it is loopback)",
      "127.0.0.1",
    )
    .option("--poll <ms>", "how often a live run page looks for new journal entries", integerOption(50), 500)
    .addHelpText(
      "after",
      [
        "",
        "Pages: / (runs; ?status=running|interrupted|completed|failed), /runs/<runId> (timeline, live),",
        "/runs/<runId>/travel (a slider over the journal's entries), /runs/<runId>/steps/<stepId> (what `loom show` prints).",
        "Run and step ids in addresses are URL-encoded (a step id's # is %23).",
      ].join("\n"),
    )
    .action(async (options: ViewOptions) => {
      const path = dbPath(io, options.db);
      await withJournal(path, async (journal) => {
        // The run-control API (approve/deny, cancel, fork) goes in `actions` once src/runtime/control.ts
        // exists, with the journal opened writable (withWritableJournal); the live feed becomes followRun.
        const viewer = await startViewer({
          journal,
          host: options.host,
          port: options.port,
          source: path,
          live: pollingSource(journal, { intervalMs: options.poll }),
        });
        const warning = exposureWarning(options.host, options.port);
        if (warning) {
          const text = warning.replace("the inspector", "the viewer").replace("this run's", "the runs'");
          println(io.stderr, `loom view: ${text}`);
        }
        println(io.stdout, `loom view: ${viewer.url} (${path}); Ctrl-C to stop`);
        try {
          await new Promise<void>((resolve) => {
            if (io.signal?.aborted) return resolve();
            io.signal?.addEventListener("abort", () => resolve(), { once: true });
          });
        } finally {
          await viewer.stop();
        }
      });
    });
}

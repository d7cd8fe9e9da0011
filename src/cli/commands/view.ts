import type { Command } from "commander";
import { cancelRun, forkRun, recordApproval } from "../../index.ts";
import { isViewerStartError } from "../../viewer/host.ts";
import { startViewer } from "../../viewer/server.ts";
import { resumeCommandFor } from "../activity.ts";
import { journalSource, withWritableJournal } from "../db.ts";
import { exposureWarning } from "../inspectServer.ts";
import { CliError, type CliIo, println } from "../io.ts";
import { type JournalCommonOptions, portOption, withJournalOptions } from "../options.ts";

interface ViewOptions extends JournalCommonOptions {
  readonly port: number;
  readonly host: string;
}

/** `loom view`: the journal's runs in a local web page, until Ctrl-C. */
export function registerView(program: Command, io: CliIo): void {
  withJournalOptions(program.command("view"))
    .description(
      "serve a local web page of the journal's runs (works offline): runs by status, a run's timeline (live while it goes on), a step's verified output, and time travel: the full and lean tool-call logs and the statechart state at any entry",
    )
    .option("--port <n>", "port to listen on, 1–65535", portOption, 8090)
    .option(
      "--host <address>",
      "address to listen on; anyone who reaches it sees the runs' tool calls, inputs and outputs (a warning is printed unless it is loopback)",
      "127.0.0.1",
    )
    .addHelpText(
      "after",
      [
        "",
        "Pages: / (runs; ?status=running|stalled|not-started|interrupted|completed|failed), /runs/<runId> (timeline, live),",
        "/runs/<runId>/travel (a slider over the journal's entries), /runs/<runId>/steps/<stepId> (what `loom show` prints).",
        "Run and step ids in addresses are URL-encoded (a step id's # is %23).",
      ].join("\n"),
    )
    .action(async (options: ViewOptions) => {
      const source = journalSource(io, options);
      const path = source.label;
      // Writable: the approve, deny, cancel and fork buttons journal through the run-control API.
      await withWritableJournal(source, async (journal) => {
        const viewer = await startViewer({
          journal,
          host: options.host,
          port: options.port,
          source: path,
          actions: { recordApproval, cancelRun, forkRun },
          resumeCommand: resumeCommandFor(source),
        }).catch((e: unknown) => {
          throw isViewerStartError(e) ? new CliError(e.code, e.message, { cause: e }) : e;
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

import type { Command } from "commander";
import type { AgentOutput } from "../../index.ts";
import { completedOutput, foldEntries, hydrateForLog, recordedModePin } from "../../journal.ts";
import { dbPath, modelCalls, readRun, sqliteSource, withWritableJournal } from "../db.ts";
import { count, printable } from "../format.ts";
import { CliError, type CliIo, println } from "../io.ts";
import { KNOWN_LOOPS } from "../loops.ts";
import { type CommonOptions, withCodecKeys, withCommon } from "../options.ts";
import { packageRoot } from "../packageRoot.ts";
import { progressBar } from "../progress.ts";
import { sessionRunToResume } from "./session.ts";

/** `loom resume <runId>`: goes on with a stopped or crashed run of a loop this command defines. */
export function registerResume(program: Command, io: CliIo): void {
  withCodecKeys(withCommon(program.command("resume")))
    .description("resume a stopped or crashed run from its journal (runs of the loops this command defines: loom-demo)")
    .argument(
      "<runId>",
      "the run (see `loom runs`), or a session's id (loop.send's sessionId): its last message's run <sessionId>/<n> is resumed",
    )
    .option("--json", "print the run's output as JSON")
    .action(async (arg: string, options: CommonOptions & { json?: boolean }) => {
      const path = dbPath(io, options.db);
      let runId = arg;
      const result = await withWritableJournal(sqliteSource(io, options), async (journal) => {
        runId = await sessionRunToResume(io, journal, arg);
        const state = foldEntries(await readRun(journal, runId, path));
        const known = state.loopId === undefined ? undefined : KNOWN_LOOPS.get(state.loopId);
        if (!known && state.status === "completed") {
          // A completed run is never appended to: its answer is in the journal, no loop is needed.
          const mode = recordedModePin(state) ?? "full";
          const output = completedOutput(await hydrateForLog(journal, state, mode), mode) as AgentOutput;
          return {
            before: { status: state.status, iterations: output.iterations },
            output,
            modelCalls: 0,
            toolCalls: 0,
          };
        }
        if (!known) {
          throw new CliError(
            "unknownLoop",
            `run ${runId} was recorded by loop "${state.loopId}", which this command does not define (it resumes ${[...KNOWN_LOOPS.keys()].join(", ")}); resume it from the program that defines that loop: loop.run({ runId: "${runId}", journal })`,
          );
        }
        const before = { status: state.status, iterations: modelCalls(state) };
        const bar = progressBar(io.stderr, known.turns(state));
        if (state.status !== "completed")
          bar.note(
            `resuming run ${printable(runId)} (${state.status}, ${count(before.iterations, "model call")} recorded)`,
          );
        const resumed = await known.resume({ journal, runId, root: packageRoot(), onProgress: bar.update });
        if (state.status !== "completed") bar.done();
        return { before, ...resumed };
      });
      const { output, before, modelCalls: ran, toolCalls } = result;
      if (options.json)
        return println(
          io.stdout,
          JSON.stringify(
            {
              runId,
              ...(runId === arg ? {} : { sessionId: arg }),
              before,
              ran: { modelCalls: ran, toolCalls },
              output,
            },
            null,
            2,
          ),
        );
      if (before.status === "completed") {
        println(io.stdout, `run ${printable(runId)} had already completed; nothing was run. Its answer:`);
      } else {
        println(
          io.stdout,
          `run ${printable(runId)} completed: this resume ran ${count(ran, "model call")} and ${count(toolCalls, "tool call")}, the rest was served from the journal.`,
        );
      }
      println(io.stdout, `  ${output.content}`);
      println(
        io.stdout,
        `  ${count(output.iterations, "model call")}, ${count(output.toolCallLog.length, "tool call")} in all`,
      );
    });
}

import type { Command } from "commander";
import type { AnyStateMachine } from "xstate";
import { agentLoopMachine, modePinMachine, toolCallMachine } from "../../journal.ts";
import { type CliIo, println, UsageError } from "../io.ts";
import { mermaid } from "../mermaid.ts";
import { withVerbose } from "../options.ts";

/** The statecharts `loom machine` prints. */
export const MACHINES: Readonly<Record<string, AnyStateMachine>> = {
  agentLoop: agentLoopMachine,
  modePin: modePinMachine,
  toolCall: toolCallMachine,
};

/** `loom machine <name> --json | --mermaid`: a statechart's definition, for visualizers. */
export function registerMachine(program: Command, io: CliIo): void {
  withVerbose(program.command("machine"))
    .description("print a statechart's definition: xstate JSON (machine.toJSON()) or a mermaid state diagram")
    .argument("<name>", `the machine: ${Object.keys(MACHINES).join(", ")}`)
    .option("--json", "the xstate definition as JSON")
    .option("--mermaid", "a mermaid stateDiagram-v2")
    .action((name: string, options: { json?: boolean; mermaid?: boolean }) => {
      const machine = Object.hasOwn(MACHINES, name) ? MACHINES[name] : undefined;
      if (!machine) throw new UsageError(`no machine "${name}"; choose one of ${Object.keys(MACHINES).join(", ")}`);
      if (options.json === options.mermaid) throw new UsageError("choose one output: --json or --mermaid");
      println(io.stdout, options.json ? JSON.stringify(machine.toJSON(), null, 2) : mermaid(machine));
    });
}

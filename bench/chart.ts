/**
 * The agent loop's chart alone: `agentLoopMachine` with actors that answer at once (a response
 * with one plain call each turn, the call settled a microtask later), a 200-turn run, CPU per
 * turn. What xstate's two macrosteps a turn (`MODEL.DONE`, `CALL.SETTLED`) cost apart from the
 * runtime's work, beside `bench/loop.ts`'s row "none" (the whole loop alone): a change to the chart
 * or to how its events come is measured here first.
 *
 *   node --import tsx bench/chart.ts
 *   CHART_RUNS=500 node --import tsx bench/chart.ts
 */
import { createActor, fromCallback, fromPromise } from "xstate";
import type { ModelResponse } from "../src/events/types.ts";
import {
  type AgentLoopEvent,
  agentLoopMachine,
  type Ending,
  type ModelCallsEvent,
  type PlainCallsEvent,
  type PrepareOutput,
} from "../src/machines/agentLoop.machine.ts";
import { printTable } from "./support.ts";

const TURNS = 200;
/** Runs measured (after as many again to warm up); `CHART_RUNS` overrides. */
const RUNS = Number(process.env.CHART_RUNS ?? 200);
const call: ModelResponse = { toolCalls: [{ id: "c", name: "lookup", input: { n: 1 } }] };
const answer: ModelResponse = { content: "done", toolCalls: [] };

const machine = agentLoopMachine.provide({
  actors: {
    prepare: fromPromise<PrepareOutput, { runId: string }>(async () => ({ kind: "ready" })),
    modelCalls: fromCallback<ModelCallsEvent, { runId: string }>(({ receive, sendBack }) => {
      receive((event) => {
        const response = event.turn < TURNS ? call : answer;
        queueMicrotask(() => sendBack({ type: "MODEL.DONE", output: { ok: true, response } } satisfies AgentLoopEvent));
      });
    }),
    plainCalls: fromCallback<PlainCallsEvent, { runId: string }>(({ receive, sendBack }) => {
      receive((event) => {
        if (event.type !== "CALLS.RUN") return;
        for (const { index } of event.calls) {
          queueMicrotask(() => sendBack({ type: "CALL.SETTLED", index, status: "ok" } satisfies AgentLoopEvent));
        }
      });
    }),
    end: fromPromise<void, Ending>(async () => {}),
  },
});

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** One run of the chart to its end; CPU µs per model call (a turn). */
async function run(): Promise<number> {
  const started = cpuMs();
  const actor = createActor(machine, { input: { runId: "chart", loopId: "chart", maxIterations: TURNS + 1 } });
  const done = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve() }));
  actor.start();
  await done;
  const status = actor.getSnapshot().value;
  if (status !== "completed") throw new Error(`the chart ended in ${JSON.stringify(status)}, not completed`);
  return ((cpuMs() - started) * 1000) / (TURNS + 1);
}

for (let i = 0; i < RUNS; i++) await run();
const perTurn: number[] = [];
for (let i = 0; i < RUNS; i++) perTurn.push(await run());
perTurn.sort((a, b) => a - b);
const at = (q: number) => perTurn[Math.min(perTurn.length - 1, Math.floor(q * perTurn.length))] as number;
const median = at(0.5);

printTable("The loop's chart alone (CPU µs a turn)", [
  { runs: RUNS, turns: TURNS + 1, median, best: at(0), p90: at(0.9) },
]);
console.log(
  `RESULT ${JSON.stringify({ bench: "chart", turns: TURNS + 1, runs: RUNS, cpuUs: median, bestCpuUs: at(0), p90CpuUs: at(0.9) })}`,
);

/**
 * The agent loop's chart alone: `agentLoopMachine` with actors that answer at once (a response
 * with one plain call each turn, the call settled a microtask later), a 200-turn run, CPU per
 * turn. What xstate's two macrosteps a turn (`MODEL.DONE`, `CALL.SETTLED`) cost apart from the
 * runtime's work, beside `bench/loop.ts`'s row "none" (the whole loop alone): a change to the chart
 * or to how its events come is measured here first.
 *
 * The chart's shapes that exist for speed each have a row here, the chart as shipped beside the
 * plain form of that one shape (its transitions rewritten from the machine's own config), the runs
 * alternated: the turn's last call settling goes straight to the next model call with one merged
 * guard (`lastSettledNextWithinLimit`) instead of through `deciding`; the response and its first
 * batch are taken in one assign instead of two.
 *
 *   node --import tsx bench/chart.ts
 *   CHART_RUNS=500 node --import tsx bench/chart.ts
 */
import { type AnyStateMachine, assign, createActor, createMachine, fromCallback, fromPromise } from "xstate";
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

const actors = {
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
};
const machine = agentLoopMachine.provide({ actors });

/** The machine's config, copied deep enough to rewrite transitions (functions are shared). */
type Config = Record<string, unknown>;
const copied = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(copied)
    : typeof value === "object" && value !== null
      ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copied(v)]))
      : value;
const path = (config: Config, ...keys: string[]) =>
  keys.reduce((at, key) => (at as Config)[key] as Config, config as unknown) as Config;

/** The chart with one of its shapes put back to the plain form. */
function plainForm(rewrite: (running: Config) => void): AnyStateMachine {
  const config = copied(agentLoopMachine.config) as Config;
  rewrite(path(config, "states", "running", "states"));
  const implementations = (agentLoopMachine as unknown as { implementations: object }).implementations;
  return createMachine(config as never, implementations as never).provide({ actors } as never);
}

/** The turn's last call settling goes through `deciding` (guard `lastSettled`, then `withinLimit` there). */
const throughDeciding = plainForm((running) => {
  const on = path(running, "dispatching", "on");
  const [, lastSettled, counted] = on["CALL.SETTLED"] as unknown[];
  on["CALL.SETTLED"] = [lastSettled, counted];
});

/** The response, then its first batch, each in its own assign. */
const twoAssigns = plainForm((running) => {
  const done = path(running, "callingModel", "on")["MODEL.DONE"] as Config[];
  const dispatching = done.find((t) => t.target === "dispatching") as Config;
  dispatching.actions = [
    assign({
      response: ({ event }: { event: { output: { response: ModelResponse } } }) => event.output.response,
      charted: ({ event }: { event: { output: { charted?: readonly number[] } } }) => event.output.charted,
    }),
    "nextBatch",
  ];
});

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/** One run of a chart to its end; CPU µs per model call (a turn). */
async function run(chart: AnyStateMachine = machine): Promise<number> {
  const started = cpuMs();
  const actor = createActor(chart, { input: { runId: "chart", loopId: "chart", maxIterations: TURNS + 1 } });
  const done = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve() }));
  actor.start();
  await done;
  const status = actor.getSnapshot().value;
  if (status !== "completed") throw new Error(`the chart ended in ${JSON.stringify(status)}, not completed`);
  return ((cpuMs() - started) * 1000) / (TURNS + 1);
}

const charts = { shipped: machine, throughDeciding, twoAssigns };
type Chart = keyof typeof charts;
const names = Object.keys(charts) as Chart[];
for (let i = 0; i < RUNS; i++) for (const name of names) await run(charts[name]);
const perTurn: Record<Chart, number[]> = { shipped: [], throughDeciding: [], twoAssigns: [] };
// Alternated run by run: each form sees the same drift of a shared machine.
for (let i = 0; i < RUNS; i++) for (const name of names) perTurn[name].push(await run(charts[name]));
const at = (name: Chart, q: number) => {
  const sorted = [...perTurn[name]].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
};
const median = at("shipped", 0.5);
const row = (chart: string, name: Chart) => ({
  chart,
  runs: RUNS,
  turns: TURNS + 1,
  median: at(name, 0.5),
  best: at(name, 0),
  p90: at(name, 0.9),
  "× shipped": at(name, 0.5) / median,
});

printTable("The loop's chart alone (CPU µs a turn), each shape for speed beside its plain form", [
  row("as shipped", "shipped"),
  row("plain: the last call settling goes through deciding", "throughDeciding"),
  row("plain: the response, then its first batch, in two assigns", "twoAssigns"),
]);
console.log(
  `RESULT ${JSON.stringify({
    bench: "chart",
    turns: TURNS + 1,
    runs: RUNS,
    cpuUs: median,
    bestCpuUs: at("shipped", 0),
    p90CpuUs: at("shipped", 0.9),
    throughDecidingVsShipped: at("throughDeciding", 0.5) / median,
    twoAssignsVsShipped: at("twoAssigns", 0.5) / median,
  })}`,
);

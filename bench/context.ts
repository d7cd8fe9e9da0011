/**
 * Context policies on a long run (issue 32): a 2,000-turn scripted run whose every turn fetches a
 * page of ~400 characters, with the policy off, `recentTurns(10)` and `summarize({ keepTurns: 10,
 * every: 50 })`. Prompt tokens are estimated as the prompt's JSON length / 4 (the model is scripted).
 * Columns: the largest prompt sent, the last one, the sum over the run, the wall time, and whether a
 * resume from turn 1,000 sent the identical prompts (their digests) as the uninterrupted run. The
 * "off" row's time is mostly the scripted model hashing and measuring its ever longer prompt (that
 * work is quadratic in the run), not the loop.
 *
 *   node --import tsx bench/context.ts
 */
import { sha256Hex } from "../src/core/digest.ts";
import { createJournal } from "../src/events/journal.ts";
import { memoryStore } from "../src/events/memory.ts";
import type { Message, ModelResponse } from "../src/events/types.ts";
import { scriptedModel } from "../src/models/scripted.ts";
import { type ContextPolicy, recentTurns, summarize } from "../src/policies/context.ts";
import type { Tool } from "../src/runtime/base/config.ts";
import { agentLoop$ } from "../src/runtime/run/agentLoop.ts";
import { printTable } from "./support.ts";

const TURNS = Number(process.env.TURNS ?? 2_000);
const STOP_AT = Math.floor(TURNS / 2);
const tokens = (messages: readonly Message[]) => Math.ceil(JSON.stringify(messages).length / 4);

function reader(context: ContextPolicy | undefined, abort?: AbortController) {
  const prompts = new Map<number, { digest: string; tokens: number }>();
  const model = scriptedModel(({ messages }): ModelResponse => {
    const first = messages[0];
    if (first?.role === "system" && first.content.startsWith("Summarize"))
      return { content: "a summary", toolCalls: [] };
    const last = messages.at(-1);
    const turn = last?.role === "tool" ? (last.output as { page: number }).page + 1 : 0;
    prompts.set(turn, { digest: sha256Hex(JSON.stringify(messages)), tokens: tokens(messages) });
    if (turn < TURNS - 1) return { toolCalls: [{ id: `c${turn}`, name: "fetch", input: { page: turn } }] };
    return { content: "done", toolCalls: [] };
  });
  const fetch: Tool = {
    description: "fetches a page",
    execute: (input) => {
      const { page } = input as { page: number };
      if (abort && page === STOP_AT) abort.abort();
      return { page, text: `page ${page} `.repeat(40) };
    },
  };
  const loop = agentLoop$({
    id: "reader",
    model,
    tools: { fetch },
    maxIterations: TURNS + 1,
    ...(context ? { context } : {}),
  });
  return { loop, prompts };
}

const journal = () => createJournal({ store: memoryStore({ json: true }) });
const policies: [string, () => ContextPolicy | undefined][] = [
  ["off", () => undefined],
  ["recentTurns(10)", () => recentTurns(10)],
  ["summarize(10, every 50)", () => summarize({ keepTurns: 10, every: 50 })],
];
const rows: Record<string, string | number>[] = [];
const results: Record<string, unknown>[] = [];
for (const [name, make] of policies) {
  const whole = reader(make());
  const started = performance.now();
  await whole.loop.run({ runId: "r", journal: journal(), input: "read every page" });
  const ms = performance.now() - started;
  const sizes = [...whole.prompts.values()].map((p) => p.tokens);
  // Stopped at STOP_AT, resumed by a new loop: the prompts it sent, compared with the uninterrupted run's.
  const abort = new AbortController();
  const first = reader(make(), abort);
  const j = journal();
  await first.loop.run({ runId: "r", journal: j, input: "read every page", signal: abort.signal }).catch(() => {});
  const second = reader(make());
  await second.loop.run({ runId: "r", journal: j });
  const sent = new Map([...first.prompts, ...second.prompts]);
  let same = true;
  for (let t = 0; t < TURNS; t++) if (sent.get(t)?.digest !== whole.prompts.get(t)?.digest) same = false;
  const row = {
    policy: name,
    turns: TURNS,
    "max prompt tokens": Math.max(...sizes),
    "last prompt tokens": sizes.at(-1) ?? 0,
    "total prompt tokens": sizes.reduce((a, b) => a + b, 0),
    "run ms": Math.round(ms),
    "resume: same prompts": same ? "yes" : "NO",
  };
  rows.push(row);
  results.push(row);
}
printTable(`Context policies on a ${TURNS}-turn scripted run (tokens ≈ JSON length / 4)`, rows);
console.log(`RESULT ${JSON.stringify({ bench: "context", results })}`);

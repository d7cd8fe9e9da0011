/**
 * What a streamed model call costs on Loom's side, per delta and to the first delta: reading an
 * AI SDK `doStream` stream directly (the floor), through `fromAiSdk(model).stream` (the adapter:
 * delta parts, the response assembled as doGenerate's), and through `streamModelCall` with both
 * chunk timeouts and a listener (what the loop runs). The provider's stream is in memory, so the
 * figures are Loom's overhead alone. Target: a few µs per delta; first delta within 1 ms of the floor.
 *
 *   node --import tsx bench/modelStream.ts
 */
import { fromAiSdk } from "../src/ai-sdk/aiSdk.ts";
import type { GenerateRequest, Model } from "../src/models/types.ts";
import { streamModelCall } from "../src/runtime/steps/modelStream.ts";
import { printResult, printTable } from "./support.ts";

const DELTAS = 2_000;
const ROUNDS = 30;

/** The v3 parts of one answer of `n` text deltas. */
function parts(n: number): unknown[] {
  const out: unknown[] = [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t" },
  ];
  for (let i = 0; i < n; i++) out.push({ type: "text-delta", id: "t", delta: `word${i % 97} ` });
  out.push({ type: "text-end", id: "t" });
  out.push({
    type: "finish",
    finishReason: { unified: "stop", raw: "stop" },
    usage: { inputTokens: { total: 10 }, outputTokens: { total: n } },
  });
  return out;
}

const provider = (chunks: readonly unknown[]) => {
  const stream = () =>
    new ReadableStream({
      start(controller) {
        for (const c of chunks) controller.enqueue(c);
        controller.close();
      },
    });
  return {
    specificationVersion: "v3" as const,
    provider: "bench",
    modelId: "memory",
    doGenerate: async () => ({ content: [], finishReason: { unified: "stop", raw: "stop" }, usage: {}, warnings: [] }),
    doStream: async () => ({ stream: stream() }),
  };
};

const request = (): GenerateRequest => ({
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  signal: new AbortController().signal,
});

type Way = { name: string; run: (onFirst: () => void) => Promise<number> };

function ways(n: number): Way[] {
  const chunks = parts(n);
  const raw = provider(chunks);
  const model: Model = fromAiSdk(provider(chunks));
  return [
    {
      name: "doStream, read directly",
      run: async (onFirst) => {
        const { stream } = await raw.doStream();
        const reader = stream.getReader();
        let deltas = 0;
        for (let r = await reader.read(); !r.done; r = await reader.read()) {
          if ((r.value as { type: string }).type === "text-delta" && deltas++ === 0) onFirst();
        }
        return deltas;
      },
    },
    {
      name: "fromAiSdk(model).stream",
      run: async (onFirst) => {
        let deltas = 0;
        for await (const part of model.stream!(request())) if (part.type === "text-delta" && deltas++ === 0) onFirst();
        return deltas;
      },
    },
    {
      name: "streamModelCall (both timeouts)",
      run: async (onFirst) => {
        let deltas = 0;
        await streamModelCall(model, request(), {
          firstChunkMs: 60_000,
          chunkIdleMs: 30_000,
          onPart: () => deltas++ === 0 && onFirst(),
        });
        return deltas;
      },
    },
  ];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

const rows: Record<string, string | number>[] = [];
let floorPerDelta = 1;
let floorFirst = 0;
for (const way of ways(DELTAS)) {
  const perDelta: number[] = [];
  const first: number[] = [];
  for (let round = 0; round < ROUNDS + 5; round++) {
    const start = performance.now();
    let firstAt = start;
    const deltas = await way.run(() => (firstAt = performance.now()));
    if (deltas !== DELTAS) throw new Error(`${way.name}: ${deltas} deltas, expected ${DELTAS}`);
    if (round < 5) continue; // warm-up
    perDelta.push(((performance.now() - start) * 1000) / DELTAS);
    first.push((firstAt - start) * 1000);
  }
  const us = median(perDelta);
  const firstUs = median(first);
  if (rows.length === 0) {
    floorPerDelta = us;
    floorFirst = firstUs;
  }
  rows.push({
    path: way.name,
    "µs per delta": us,
    "× floor": us / floorPerDelta,
    "first delta (µs)": firstUs,
    "first delta − floor (µs)": firstUs - floorFirst,
  });
}
printTable(`One streamed call of ${DELTAS} text deltas, in memory (median of ${ROUNDS})`, rows);
const floorRow = rows[0];
const overhead = rows.slice(1).map((r) => ({
  path: r.path,
  perDeltaUs: Number(r["µs per delta"]) - Number(floorRow?.["µs per delta"]),
  firstDeltaOverFloorUs: Number(r["first delta − floor (µs)"]),
}));
printResult("modelStream", {
  target: "a few µs a delta above the floor; first delta within 1,000 µs of the floor",
  overhead,
  met: overhead.every((o) => o.firstDeltaOverFloorUs <= 1000),
});

import { describe, expect, it } from "vitest";
import {
  agentLoop$,
  createJournal,
  isReplayError,
  type ModelResponse,
  memoryStore,
  readJournal,
  replayRun,
  scriptedModel,
  type Tool,
} from "../../src/index.ts";

/** A shop agent: search, fetch what it found, send a note (a tool that changes the world), answer. */
function shop(script: ModelResponse[], options: { system?: string } = {}) {
  const executed: Record<string, number> = { search: 0, fetch: 0, send: 0 };
  const keys: string[] = [];
  const tools: Record<string, Tool> = {
    search: {
      description: "search",
      execute: async (input: unknown, ctx) => {
        executed.search = (executed.search ?? 0) + 1;
        keys.push(ctx.idempotencyKey);
        return { hits: [`${(input as { q: string }).q}-1`] };
      },
    },
    fetch: {
      description: "fetch",
      execute: async (input: unknown) => {
        executed.fetch = (executed.fetch ?? 0) + 1;
        return { item: (input as { id: string }).id, price: 42 };
      },
    },
    send: {
      description: "sends a note to the customer",
      sideEffects: true,
      execute: async () => {
        executed.send = (executed.send ?? 0) + 1;
        return { sent: true };
      },
    },
  };
  const loop = agentLoop$({ id: "shop", model: scriptedModel(script), tools, ...options });
  return { loop, executed, keys };
}

const script = (query = "shoes", note = "found shoes"): ModelResponse[] => [
  { content: "", toolCalls: [{ id: "c1", name: "search", input: { q: query } }] },
  { content: "", toolCalls: [{ id: "c2", name: "fetch", input: { id: `${query}-1` } }] },
  { content: "", toolCalls: [{ id: "c3", name: "send", input: { note } }] },
  { content: `Here are ${query}.`, toolCalls: [] },
];

async function recorded() {
  const journal = createJournal({ store: memoryStore() });
  const original = shop(script());
  await original.loop.run({ runId: "r-1", journal, input: "find me shoes" });
  return { journal, original, entries: (await readJournal(journal, "r-1")).length };
}

describe("replayRun", () => {
  it("replays an unchanged agent from the record: no tool runs, the model is served, the diff says identical", async () => {
    const { journal, entries } = await recorded();
    const candidate = shop(script());
    const replay = await replayRun(journal, "r-1", { loop: candidate.loop, model: "recorded" });
    expect(replay.error).toBeUndefined();
    expect(replay.output?.content).toBe("Here are shoes.");
    expect(candidate.executed).toEqual({ search: 0, fetch: 0, send: 0 });
    expect(replay.counts).toEqual({ servedTools: 3, servedModelCalls: 4, executedTools: 0 });
    expect(replay.diff.identical).toBe(true);
    // The record is only read; the replay says what it replays.
    expect((await readJournal(journal, "r-1")).length).toBe(entries);
    const [started] = await readJournal(replay.journal, replay.runId);
    expect(started?.type === "run.started" && started.data.replayOf).toMatchObject({ runId: "r-1", seq: entries });
  });

  it("stops at the first model call fed another prompt when the model is recorded (the determinism check)", async () => {
    const { journal } = await recorded();
    const candidate = shop(script(), { system: "Be brief." });
    const replay = await replayRun(journal, "r-1", { loop: candidate.loop, model: "recorded" });
    expect(isReplayError(replay.error)).toBe(true);
    expect(replay.error).toMatchObject({ code: "promptChanged", stepId: "shop#turn:0:model" });
    expect(candidate.executed).toEqual({ search: 0, fetch: 0, send: 0 });
  });

  it("stops at a call the record cannot serve, by default, naming the step; executes it when told, never a side effect", async () => {
    const { journal } = await recorded();
    // The changed agent searches for boots: a new input; the fetch and the note follow from it.
    const failing = shop(script("boots", "found boots"));
    const stopped = await replayRun(journal, "r-1", { loop: failing.loop });
    expect(stopped.error).toMatchObject({ code: "newInput", stepId: "shop#turn:0:tool:0" });
    expect(failing.executed.search).toBe(0);

    const live = shop(script("boots", "found boots"));
    const replay = await replayRun(journal, "r-1", { loop: live.loop, onNewInput: "live" });
    expect(live.executed).toEqual({ search: 1, fetch: 1, send: 0 }); // the note is a side effect: never sent
    expect(replay.error).toMatchObject({ code: "newInput", stepId: "shop#turn:2:tool:0" });
    expect(replay.newInputs.map((c) => c.toolName)).toEqual(["search", "fetch", "send"]);
    // Its only argument changed: a new call in the diff's eyes, at turn 0.
    expect(replay.diff.firstDivergence).toMatchObject({ turn: 0, what: "tool-calls" });

    const named = shop(script("boots", "found boots"));
    const sent = await replayRun(journal, "r-1", { loop: named.loop, onNewInput: "live", tools: { send: "live" } });
    expect(sent.error).toBeUndefined();
    expect(named.executed.send).toBe(1);
  });

  it("answers a new input with a function, and never runs a tool named never", async () => {
    const { journal } = await recorded();
    const candidate = shop(script("boots", "found boots"));
    const replay = await replayRun(journal, "r-1", {
      loop: candidate.loop,
      tools: { search: "never" },
      onNewInput: (call) => ({ stubbed: call.toolName }),
    });
    expect(replay.error).toBeUndefined();
    expect(candidate.executed).toEqual({ search: 0, fetch: 0, send: 0 });
    expect(replay.counts.executedTools).toBe(0);
  });

  it("gives live tools idempotency keys of their own, not the recorded run's", async () => {
    const { journal, original } = await recorded();
    const candidate = shop(script());
    await replayRun(journal, "r-1", { loop: candidate.loop, tools: { search: "live" } });
    expect(candidate.keys).toHaveLength(1);
    expect(candidate.keys[0]).not.toBe(original.keys[0]);
  });

  it("refuses an unknown run, and a replay that would write the recorded run", async () => {
    const { journal } = await recorded();
    await expect(replayRun(journal, "nope", { loop: shop(script()).loop })).rejects.toMatchObject({
      code: "runNotFound",
    });
    await expect(
      replayRun(journal, "r-1", { loop: shop(script()).loop, into: journal, runId: "r-1" }),
    ).rejects.toMatchObject({
      code: "sameJournal",
    });
  });
});

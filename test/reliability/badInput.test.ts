import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { digestOf } from "../../src/core/digest.ts";
import { type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import type { Journal } from "../../src/events/spi.ts";
import type { Message, ModelResponse } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { GenerateRequest, Model } from "../../src/models/types.ts";
import type { AgentOutput, AgentStep, ToolCallLogMode } from "../../src/projections/types.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";
import { frameProgress, jsonJournal, logsOf } from "../support/loop.ts";

/**
 * Bad input from both sides of the loop. Tool outputs that JSON cannot hold as they are: the loop
 * never crashes, records the JSON form (or, where there is none, a failed frame whose outcome says
 * why), and the lean digest is digestOf the full toolOutput (null/0 where that has no canonical
 * form). Defective model responses: fed back to the model, or an interruption with a clear
 * error; nothing half-journaled.
 */

let tmp: ReturnType<typeof tempDir>;
const prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort();
beforeAll(() => {
  tmp = tempDir("loom-bad-input-");
});
afterAll(() => {
  tmp.remove();
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeBefore);
});

const toolMessages = (messages: readonly Message[]) =>
  messages.filter((m): m is Extract<Message, { role: "tool" }> => m.role === "tool");

/** Every entry's data and meta, read back as text from the SQLite file (its loom_journal view), parse as JSON. */
function rawRowsParse(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db.prepare("SELECT seq, data, meta FROM loom_journal ORDER BY run_id, seq").all() as {
      seq: number;
      data: string;
      meta: string;
    }[];
    for (const row of rows) {
      expect(() => JSON.parse(row.data), `data of seq ${row.seq}`).not.toThrow();
      expect(() => JSON.parse(row.meta), `meta of seq ${row.seq}`).not.toThrow();
    }
    return rows.length;
  } finally {
    db.close();
  }
}

/** No frame was left started without its completion, except `open` (an interrupted model call). */
async function nothingHalfJournaled(journal: Journal, runId: string, open: string[] = []): Promise<void> {
  const { open: left } = frameProgress(await readJournal(journal, runId)); // readJournal validates
  expect([...left].sort()).toEqual([...open].sort());
}

// ── tool outputs ───────────────────────────────────────────────────────────────────────────────

type Expected =
  /** Recorded as its JSON form (what the model was fed), with this digest (null: no canonical form). */
  | { readonly recorded: unknown; readonly noCanonicalForm?: true }
  /** No JSON form: a failed frame, fed back as `output-not-json` with a message matching. */
  | { readonly notJson: RegExp };

interface BadOutput {
  readonly name: string;
  readonly output: () => unknown;
  readonly expected: Expected;
  /** More to check on the full entry's toolOutput (after the resume too). */
  readonly check?: (toolOutput: unknown) => void;
}

const TEN_MB = 10 * 1024 * 1024;

function nested(depth: number): unknown {
  let v: unknown = { leaf: true };
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

const BAD_OUTPUTS: BadOutput[] = [
  {
    name: "a cycle",
    output: () => {
      const o: Record<string, unknown> = { name: "loop" };
      o.self = o;
      return o;
    },
    expected: { notJson: /circular/i },
  },
  { name: "a BigInt", output: () => ({ n: 12345678901234567890n }), expected: { notJson: /BigInt/ } },
  {
    name: "a Map and a Set",
    output: () => ({ m: new Map([["k", 1]]), s: new Set([1, 2]) }),
    expected: { recorded: { m: {}, s: {} } },
  },
  {
    name: "a Date",
    output: () => ({ at: new Date(Date.UTC(2026, 0, 2)) }),
    expected: { recorded: { at: "2026-01-02T00:00:00.000Z" } },
  },
  {
    name: "a toJSON that throws",
    output: () => ({
      toJSON() {
        throw new Error("toJSON refuses");
      },
    }),
    expected: { notJson: /toJSON refuses/ },
  },
  {
    name: "a getter that throws",
    output: () => ({
      ok: 1,
      get boom(): never {
        throw new Error("getter refuses");
      },
    }),
    expected: { notJson: /getter refuses/ },
  },
  {
    name: "a 10 MB string",
    output: () => ({ text: "x".repeat(TEN_MB) }),
    expected: { recorded: { text: "x".repeat(TEN_MB) } },
  },
  {
    name: "100,000-deep nesting",
    output: () => nested(100_000),
    expected: { notJson: /call stack/ },
  },
  {
    name: "1,000-deep nesting (past the canonicalizer's cap, within JSON's)",
    output: () => nested(1_000),
    expected: { recorded: nested(1_000), noCanonicalForm: true },
  },
  {
    name: "__proto__ and constructor keys",
    output: () =>
      JSON.parse('{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},"toString":"x"}'),
    expected: {
      recorded: JSON.parse(
        '{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},"toString":"x"}',
      ),
    },
    check: (toolOutput) => {
      // Own data members, not a prototype: the recorded object is a plain object with those keys.
      expect(Object.getPrototypeOf(toolOutput)).toBe(Object.prototype);
      expect(Object.keys(toolOutput as object)).toEqual(["__proto__", "constructor", "toString"]);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(Object.prototype.toString.call({})).toBe("[object Object]");
    },
  },
  {
    name: "lone surrogates",
    output: () => ({ s: "half \uD800 a pair", "\uDC00key": 1 }),
    expected: { recorded: { s: "half \uD800 a pair", "\uDC00key": 1 }, noCanonicalForm: true },
  },
  // Recorded with its members in the tool's order (its JSON form's), not the canonical text's.
  { name: "-0", output: () => ({ z: -0, list: [-0, 0] }), expected: { recorded: { z: 0, list: [0, 0] } } },
  {
    name: "NaN and Infinity",
    output: () => ({ n: Number.NaN, inf: Number.POSITIVE_INFINITY, list: [Number.NaN] }),
    expected: { recorded: { n: null, inf: null, list: [null] } },
  },
  { name: "undefined (no output)", output: () => undefined, expected: { recorded: undefined, noCanonicalForm: true } },
  {
    name: "a function",
    output: () => () => "not data",
    expected: { recorded: undefined, noCanonicalForm: true },
  },
];

interface Outcome {
  readonly output: AgentOutput;
  readonly fed: Extract<Message, { role: "tool" }> | undefined;
  readonly journal: OpenJournal;
  readonly path: string;
}

let files = 0;
async function runBadTool(bad: BadOutput, mode: ToolCallLogMode): Promise<Outcome> {
  const path = tmp.file(`bad-${files++}.db`);
  const seen: GenerateRequest[] = [];
  const model = scriptedModel(({ turn, request }) => {
    seen.push(request);
    return turn === 0 ? { toolCalls: [{ id: "c0", name: "bad", input: {} }] } : { content: "survived", toolCalls: [] };
  });
  const bad$: Tool = { description: "returns bad output", execute: () => bad.output() };
  const loop = agentLoop$({ id: "bad", model, tools: { bad: bad$ }, toolCallLog: mode });
  const journal = openSqliteJournal(path);
  const output = await loop.run({ runId: "r", input: bad.name, journal });
  return { output, fed: toolMessages(seen[1]?.messages ?? [])[0], journal, path };
}

describe("tool outputs with no plain JSON form", () => {
  const pairs = BAD_OUTPUTS.flatMap((bad) => (["full", "lean"] as const).map((mode) => ({ bad, mode })));

  it.each(pairs)(
    "$bad.name ($mode): the loop completes, records the JSON form or a failed frame, digests as D2 says, and the journal stays JSON",
    async ({ bad, mode }) => {
      const { output, fed, journal, path } = await runBadTool(bad, mode);
      try {
        expect(output.content).toBe("survived");
        const full = await rebuildToolCallLog(journal, "r", "full");
        const entry = full[0] as AgentStep;
        const entries = await readJournal(journal, "r");
        if ("notJson" in bad.expected) {
          const outcome = entries.find((e) => e.type === "decision.recorded" && e.data.decisionId.endsWith(":outcome"));
          if (outcome?.type !== "decision.recorded") throw new Error("no outcome decision");
          const { failed } = outcome.data.choice as { failed: { error: string; message: string } };
          expect(failed.error).toBe("output-not-json");
          expect(failed.message).toMatch(/no JSON form/);
          expect(failed.message).toMatch(bad.expected.notJson);
          expect(entry.toolOutput).toEqual(failed);
          expect(fed).toMatchObject({ isError: true, output: failed });
          const frame = entries.find((e) => e.type === "frame.completed" && e.data.frameId === "bad#turn:0:tool:0");
          expect(frame?.data).toEqual({ frameId: "bad#turn:0:tool:0", failed: true });
        } else {
          expect(JSON.stringify(entry.toolOutput)).toBe(JSON.stringify(bad.expected.recorded));
          expect(fed?.isError).toBe(false);
          expect(JSON.stringify(fed?.output)).toBe(JSON.stringify(bad.expected.recorded));
        }
        // The lean entry: digestOf(full toolOutput), which is null/0 exactly when there is no canonical form.
        const lean = await rebuildToolCallLog(journal, "r", "lean");
        const d = digestOf(entry.toolOutput);
        expect(lean[0]).toMatchObject({
          status: "notJson" in bad.expected ? "error" : "ok",
          digest: d.digest,
          bytes: d.bytes,
          stepId: "bad#turn:0:tool:0",
        });
        if ("noCanonicalForm" in bad.expected) expect(d).toEqual({ digest: null, bytes: 0 });
        else expect(d.digest).toMatch(/^[0-9a-f]{64}$/);
        // What the loop returned is the rebuilt log of its mode.
        expect(JSON.stringify(output.toolCallLog)).toBe(JSON.stringify(mode === "lean" ? lean : full));

        // The journal: valid, every row JSON as stored, nothing half-journaled; a resume reads it back identically.
        expect(rawRowsParse(path)).toBe(entries.length);
        await nothingHalfJournaled(journal, "r");
        const again = await agentLoop$({
          id: "bad",
          model: scriptedModel([]),
          tools: { bad: { description: "", execute: bad.output } },
          toolCallLog: mode,
        }).run({ runId: "r", journal });
        expect(JSON.stringify(again)).toBe(JSON.stringify(output));
        bad.check?.(entry.toolOutput);
        bad.check?.(((await rebuildToolCallLog(journal, "r", "full"))[0] as AgentStep).toolOutput);
        expect(await logsOf(journal, "r")).toEqual({ full: JSON.stringify(full), lean: JSON.stringify(lean) });
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      } finally {
        await journal.close();
      }
    },
  );

  it("the same outputs, resumed from an interruption after they were recorded: the resumed run feeds the same values", async () => {
    // One run that meets every bad output in turn, stopped after each turn and resumed by a fresh loop.
    const outputs = BAD_OUTPUTS.filter((b) => !b.name.startsWith("a 10 MB")); // 10 MB is covered above; keep this quick
    const script = (turn: number): ModelResponse =>
      turn < outputs.length
        ? { toolCalls: [{ id: `c${turn}`, name: "bad", input: { turn } }] }
        : { content: "survived all", toolCalls: [] };
    const bad: Tool = {
      description: "returns the turn's bad output",
      execute: (input) => outputs[(input as { turn: number }).turn]?.output(),
    };
    const fedLive: unknown[] = [];
    const live = await agentLoop$({
      id: "all",
      model: scriptedModel(({ turn, messages }) => {
        fedLive.push(JSON.stringify(toolMessages(messages)));
        return script(turn);
      }),
      tools: { bad },
      toolCallLog: "lean",
    }).run({ runId: "live", input: "go", journal: jsonJournal() });

    const journal = jsonJournal();
    const fedResumed: unknown[] = [];
    let stops = 0;
    for (;;) {
      const loop = agentLoop$({
        id: "all",
        model: scriptedModel(({ turn, messages }) => {
          fedResumed.push(JSON.stringify(toolMessages(messages)));
          return script(turn);
        }),
        tools: { bad },
        toolCallLog: "lean",
        maxIterations: stops + 1,
      });
      try {
        const out = await loop.run({ runId: "r", input: "go", journal });
        expect(JSON.stringify(out)).toBe(JSON.stringify(live));
        break;
      } catch (e) {
        if (!isAgentInterruptedError(e)) throw e;
        expect(e.run.reason).toBe("max-iterations");
        stops++;
      }
    }
    expect(stops).toBe(outputs.length);
    expect(fedResumed).toEqual(fedLive);
    await nothingHalfJournaled(journal, "r");
  });
});

// ── model responses ────────────────────────────────────────────────────────────────────────────

const echo = (executed: string[]): Tool => ({
  description: "echoes",
  execute: (input, { stepId }) => {
    executed.push(stepId);
    return { echoed: input };
  },
});

/** A model that answers `first` at turn 0 and then "ok", recording what it was fed. */
function oneDefect(first: () => unknown) {
  const seen: GenerateRequest[] = [];
  const model: Model = {
    async generate(request) {
      seen.push(request);
      const turn = request.messages.filter((m) => m.role === "assistant").length;
      return (turn === 0 ? first() : { content: "ok", toolCalls: [] }) as ModelResponse;
    },
  };
  return { model, seen, fed: () => toolMessages(seen[1]?.messages ?? []) };
}

describe("defective model responses", () => {
  it("a tool call without a name is settled as an unknown tool and fed back as an error", async () => {
    const executed: string[] = [];
    const { model, fed } = oneDefect(() => ({ toolCalls: [{ id: "c1", input: { q: 1 } }] }));
    const journal = jsonJournal();
    const out = await agentLoop$({ id: "m", model, tools: { echo: echo(executed) } }).run({
      runId: "r",
      input: "go",
      journal,
    });
    expect(out.content).toBe("ok");
    expect(executed).toEqual([]);
    expect(fed()).toEqual([
      expect.objectContaining({ toolCallId: "c1", toolName: "", isError: true, output: expect.anything() }),
    ]);
    expect(fed()[0]?.output).toMatchObject({
      error: "unknown-tool",
      message: expect.stringMatching(/no tool named ""; available: echo/),
    });
    await nothingHalfJournaled(journal, "r");
  });

  it("a call that is not an object, and toolCalls that is not a list, do not crash the loop", async () => {
    const { model, fed } = oneDefect(() => ({ toolCalls: [null, 42] }));
    const journal = jsonJournal();
    const out = await agentLoop$({ id: "m", model, tools: { echo: echo([]) } }).run({
      runId: "r",
      input: "go",
      journal,
    });
    expect(out.content).toBe("ok");
    expect(fed().map((m) => [m.toolCallId, m.toolName, m.isError])).toEqual([
      ["call_0", "", true],
      ["call_1", "", true],
    ]);
    const notAList = oneDefect(() => ({ content: "a final answer", toolCalls: "echo" }));
    const out2 = await agentLoop$({ id: "m", model: notAList.model, tools: { echo: echo([]) } }).run({
      runId: "r2",
      input: "go",
      journal,
    });
    expect(out2).toEqual({ content: "a final answer", toolCallLog: [], iterations: 1 });
    await nothingHalfJournaled(journal, "r");
    await nothingHalfJournaled(journal, "r2");
  });

  it("a tool-call input that was not JSON (the adapter's marker) is settled as invalid input; the tool never runs", async () => {
    const executed: string[] = [];
    const { model, fed } = oneDefect(() => ({
      toolCalls: [
        {
          id: "c1",
          name: "echo",
          input: { __loomInvalidInput: '{"q": 1,}', error: "Unexpected token } in JSON at position 7" },
        },
      ],
    }));
    const journal = jsonJournal();
    const out = await agentLoop$({ id: "m", model, tools: { echo: echo(executed) }, toolCallLog: "lean" }).run({
      runId: "r",
      input: "go",
      journal,
    });
    expect(executed).toEqual([]);
    expect(fed()[0]).toMatchObject({
      isError: true,
      output: {
        error: "invalid-input",
        message: "the tool-call input is not valid JSON (Unexpected token } in JSON at position 7)",
      },
    });
    expect(out.toolCallLog[0]).toMatchObject({ status: "error", toolName: "echo" });
    const settled = (await readJournal(journal, "r")).find((e) => e.type === "call.settled");
    expect(settled?.data).toMatchObject({ reason: "invalid-input", status: "error" });
    await nothingHalfJournaled(journal, "r");
  });

  it("a tool-call input with no JSON form (a BigInt, a cycle: a buggy adapter) is fed back as invalid input; the rest of the response stands", async () => {
    const executed: string[] = [];
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const { model, fed } = oneDefect(() => ({
      content: "calling",
      toolCalls: [
        { id: "c1", name: "echo", input: { n: 1n } },
        { id: "c2", name: "echo", input: { fine: true } },
        { id: "c3", name: "echo", input: cycle },
      ],
    }));
    const journal = jsonJournal();
    const out = await agentLoop$({ id: "m", model, tools: { echo: echo(executed) } }).run({
      runId: "r",
      input: "go",
      journal,
    });
    expect(out.iterations).toBe(2);
    expect(executed).toEqual(["m#turn:0:tool:1"]);
    expect(fed().map((m) => [m.toolCallId, m.isError])).toEqual([
      ["c1", true],
      ["c2", false],
      ["c3", true],
    ]);
    expect(fed()[0]?.output).toEqual({
      error: "invalid-input",
      message: expect.stringMatching(/^the tool-call input is not valid JSON \(.*BigInt.*\)$/),
    });
    expect(fed()[2]?.output).toEqual({
      error: "invalid-input",
      message: expect.stringMatching(/^the tool-call input is not valid JSON \(.*circular.*\)$/is),
    });
    const response = (await readJournal(journal, "r")).find((e) => e.type === "frame.completed");
    expect(response?.data).toMatchObject({ output: { content: "calling" } });
    await nothingHalfJournaled(journal, "r");
  });

  it("two calls with the same id both run, and their results stay distinguishable", async () => {
    const executed: string[] = [];
    const { model, fed } = oneDefect(() => ({
      toolCalls: [
        { id: "dup", name: "echo", input: { n: 1 } },
        { id: "dup", name: "echo", input: { n: 2 } },
      ],
    }));
    const journal = jsonJournal();
    const out = await agentLoop$({ id: "m", model, tools: { echo: echo(executed) } }).run({
      runId: "r",
      input: "go",
      journal,
    });
    expect(executed.sort()).toEqual(["m#turn:0:tool:0", "m#turn:0:tool:1"]);
    const ids = fed().map((m) => m.toolCallId);
    expect(new Set(ids).size).toBe(2);
    expect(fed().map((m) => m.output)).toEqual([{ echoed: { n: 1 } }, { echoed: { n: 2 } }]);
    expect(out.toolCallLog).toHaveLength(2);
    await nothingHalfJournaled(journal, "r");
  });

  it("an empty response (no content, no calls) is the final answer: the run completes with empty content", async () => {
    for (const empty of [{ toolCalls: [] }, {}, undefined, null]) {
      const { model } = oneDefect(() => empty);
      const journal = jsonJournal();
      const out = await agentLoop$({ id: "m", model }).run({ runId: "r", input: "go", journal });
      expect(out, JSON.stringify(empty)).toEqual({ content: "", toolCallLog: [], iterations: 1 });
      const recorded = (await readJournal(journal, "r")).find((e) => e.type === "frame.completed");
      expect(recorded?.data).toEqual({ frameId: "m#turn:0:model", output: { toolCalls: [] } });
      await nothingHalfJournaled(journal, "r");
    }
  });

  it('a model that throws interrupts the run ("model-error", the message kept); the run resumes from that model call', async () => {
    for (const thrown of [new TypeError("upstream 503"), "a bare string"]) {
      let fail = true;
      const executed: string[] = [];
      const model: Model = {
        async generate(request) {
          const turn = request.messages.filter((m) => m.role === "assistant").length;
          if (turn === 1 && fail) throw thrown;
          return turn === 0
            ? { toolCalls: [{ id: "c1", name: "echo", input: { n: 1 } }] }
            : { content: "recovered", toolCalls: [] };
        },
      };
      const loop = agentLoop$({ id: "m", model, tools: { echo: echo(executed) } });
      const journal = jsonJournal();
      const e = await loop.run({ runId: "r", input: "go", journal }).catch((x: unknown) => x);
      if (!isAgentInterruptedError(e)) throw e;
      expect(e.run.reason).toBe("model-error");
      expect(e.message).toMatch(/run r interrupted \(model-error\).*loop\.run\(\{ runId: "r" \}\)/);
      const entries = await readJournal(journal, "r");
      expect(entries.at(-1)?.data).toEqual({
        reason: "model-error",
        detail: {
          frameId: "m#turn:1:model",
          ...(thrown instanceof Error
            ? { name: "TypeError", message: "upstream 503" }
            : { name: "Error", message: "a bare string" }),
        },
        cause:
          thrown instanceof Error
            ? { name: "TypeError", message: "upstream 503", retryable: false }
            : { name: "Error", message: "a bare string", retryable: false },
      });
      await nothingHalfJournaled(journal, "r", ["m#turn:1:model"]);
      fail = false;
      const out = await loop.run({ runId: "r", journal });
      expect(out.content).toBe("recovered");
      expect(executed).toEqual(["m#turn:0:tool:0"]);
      await nothingHalfJournaled(journal, "r");
    }
  });

  it('a model that hangs past the abort signal: interrupted ("aborted") promptly; its late answer is not journaled', async () => {
    let release: (r: ModelResponse) => void = () => {};
    const hung = new Promise<ModelResponse>((resolve) => {
      release = resolve;
    });
    let hang = true;
    const model: Model = {
      generate: () => (hang ? hung : Promise.resolve({ content: "answered", toolCalls: [] })), // ignores the signal
    };
    const loop = agentLoop$({ id: "m", model });
    const journal = jsonJournal();
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("user pressed stop")), 20);
    const started = Date.now();
    const e = await loop.run({ runId: "r", input: "go", journal, signal: controller.signal }).catch((x: unknown) => x);
    const took = Date.now() - started;
    if (!isAgentInterruptedError(e)) throw e;
    expect(e.run.reason).toBe("aborted");
    expect(took).toBeLessThan(1_000);
    const length = (await readJournal(journal, "r")).length;
    release({ content: "too late", toolCalls: [] });
    await new Promise((r) => setTimeout(r, 20));
    const entries = await readJournal(journal, "r");
    expect(entries).toHaveLength(length);
    expect(entries.map((x) => x.type)).toEqual(["run.started", "frame.started", "run.interrupted"]);
    await nothingHalfJournaled(journal, "r", ["m#turn:0:model"]);
    hang = false;
    const out = await loop.run({ runId: "r", journal });
    expect(out.content).toBe("answered");
    await nothingHalfJournaled(journal, "r");
  });
});

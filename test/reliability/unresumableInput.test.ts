import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import type { CallSettledData } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { ToolCallLogMode } from "../../src/projections/types.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { tempDir } from "../events/tmp.ts";
import { logsOf } from "../support/loop.ts";

/**
 * Tool inputs with no canonical JSON form (a lone surrogate, nesting past the canonicalizer's cap)
 * have no digest a frame could record and a resume recompute. They are refused as
 * `invalid-input` before the tool runs (call.settled, fed back to the model), so the run resumes
 * from a freshly opened journal and completes, its log unchanged.
 */

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-unresumable-");
});
afterAll(() => tmp.remove());

function nested(depth: number): unknown {
  let v: unknown = { leaf: true };
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

const BAD_INPUTS: { readonly name: string; readonly input: unknown; readonly why: RegExp }[] = [
  { name: "a lone high surrogate", input: { text: "abc\ud800def" }, why: /lone UTF-16 surrogate/ },
  { name: "a lone low surrogate in a key", input: { "k\udc00": 1 }, why: /lone UTF-16 surrogate/ },
  { name: "600-deep nesting", input: nested(600), why: /deeper than 512/ },
];

function loopOf(mode: ToolCallLogMode, executed: unknown[], maxIterations?: number) {
  return agentLoop$({
    id: "bad",
    toolCallLog: mode,
    model: scriptedModel([
      {
        toolCalls: [
          ...BAD_INPUTS.map((b, i) => ({ id: `c${i}`, name: "echo", input: b.input })),
          { id: "ok", name: "echo", input: { text: "fine" } },
        ],
      },
      { content: "done", toolCalls: [] },
    ]),
    tools: {
      echo: {
        description: "echoes its input",
        execute: (input: unknown) => {
          executed.push(input);
          return { echoed: true };
        },
      },
    },
    ...(maxIterations ? { maxIterations } : {}),
  });
}

describe("a tool input with no canonical JSON form never makes a run unresumable", () => {
  for (const mode of ["full", "lean"] as const) {
    it(`is refused as invalid-input before the tool runs, and the run resumes from a reopened file (${mode})`, async () => {
      const path = tmp.file(`bad-input-${mode}.db`);
      const runId = `bad-${mode}`;
      const executed: unknown[] = [];
      const live = openSqliteJournal(path);
      try {
        // The first attempt stops after the tools, before the model is asked again.
        const stopped = await loopOf(mode, executed, 1)
          .run({ runId, input: "go", journal: live })
          .catch((e: unknown) => e);
        if (!isAgentInterruptedError(stopped)) throw stopped;
        expect(stopped.run.reason).toBe("max-iterations");
        const settled = (await readJournal(live, runId))
          .filter((e) => e.type === "call.settled")
          .map((e) => e.data as CallSettledData);
        expect(settled.map((s) => [s.stepId, s.reason, s.status])).toEqual(
          BAD_INPUTS.map((_, i) => [`bad#turn:0:tool:${i}`, "invalid-input", "error"]),
        );
        settled.forEach((s, i) => {
          expect((s.result as { message: string }).message).toMatch(BAD_INPUTS[i]?.why as RegExp);
        });
      } finally {
        await live.close();
      }
      expect(executed).toEqual([{ text: "fine" }]);

      const reopened = openSqliteJournal(path);
      try {
        const out = await loopOf(mode, executed).run({ runId, journal: reopened });
        expect(out.content).toBe("done");
        expect(out.toolCallLog).toHaveLength(BAD_INPUTS.length + 1);
        expect(executed).toEqual([{ text: "fine" }]); // nothing ran again
        const again = await loopOf(mode, executed).run({ runId, journal: reopened });
        expect(JSON.stringify(again)).toBe(JSON.stringify(out));
        const logs = await logsOf(reopened, runId);
        expect(logs.full).toContain("invalid-input");
      } finally {
        await reopened.close();
      }
    });
  }
});

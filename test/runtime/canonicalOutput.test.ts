import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/core/canonicalJson.ts";
import { sha256Hex } from "../../src/core/digest.ts";
import { openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import type { Message } from "../../src/events/types.ts";
import { dataText, withDataText } from "../../src/events/validate.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/agentLoop.ts";
import type { Tool } from "../../src/runtime/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/errors.ts";
import { tempDir } from "../events/tmp.ts";

/**
 * A tool's output is recorded in its canonical form: its members in RFC 8785 order, the live value
 * and the value a resume reads back alike, and the stored text is the canonical text its digest was
 * taken of (written once, for the digest, and handed to the store: not serialized a second time).
 */

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-canonical-output-");
});
afterAll(() => tmp.remove());

/**
 * Members listed out of order at every level, as a tool builds them; `ranks` has names that are
 * array indexes, which any JavaScript object lists first in numeric order ("9", "10") where the
 * canonical text sorts them as strings ("10", "9").
 */
const output = (n: number) => ({
  title: `page ${n}`,
  ranks: { 10: "ten", 9: "nine", b: 1 },
  id: n,
  hits: [
    { text: "b", score: 0.5, doc: "x" },
    { text: "c", score: 0.25, doc: "y" },
  ],
  meta: { z: true, a: null },
});

const toolMessages = (messages: readonly Message[]) =>
  messages.filter((m): m is Extract<Message, { role: "tool" }> => m.role === "tool");

describe("a tool output recorded in canonical form", () => {
  it("is stored as the canonical text its digest names, fed and logged in the same order live and resumed", async () => {
    const path = tmp.file("canonical.db");
    const fedLive: string[] = [];
    const fedResumed: string[] = [];
    const search: Tool = { description: "searches", execute: (input) => output((input as { n: number }).n) };
    // The first process's model fails (not retried) after two tool turns; the second answers.
    const loopWith = (fed: string[], failAt: number | undefined) =>
      agentLoop$({
        id: "canon",
        model: scriptedModel(({ turn, request }) => {
          fed.push(JSON.stringify(toolMessages(request.messages).map((m) => m.output)));
          if (turn === failAt) throw Object.assign(new Error("unauthorized"), { status: 401 });
          return turn < 2
            ? { toolCalls: [{ id: `c${turn}`, name: "search", input: { n: turn } }] }
            : { content: "done", toolCalls: [] };
        }),
        tools: { search },
        retry: { model: { maxAttempts: 1 } },
      });

    const first = openSqliteJournal(path);
    const e = await loopWith(fedLive, 2)
      .run({ runId: "r", input: "go", journal: first })
      .catch((x: unknown) => x);
    if (!isAgentInterruptedError(e)) throw e;
    await first.close();

    const second = openSqliteJournal(path);
    const out = await loopWith(fedResumed, undefined).run({ runId: "r", journal: second });
    expect(out.content).toBe("done");
    // The model saw the same tool results, byte for byte, live and after the resume: members in the
    // order the canonical text, read back, lists them.
    const readBack = `[${JSON.stringify(JSON.parse(canonicalJson(output(0))))},${JSON.stringify(JSON.parse(canonicalJson(output(1))))}]`;
    expect(readBack).toContain('{"9":"nine","10":"ten","b":1}');
    expect(readBack).toContain('"hits":[{"doc":"x","score":0.5,"text":"b"}');
    expect(fedResumed.at(-1)).toBe(fedLive.at(-1));
    expect(fedLive.at(-1)).toBe(readBack);
    // The returned log (rebuilt from the journal on the resume) lists the outputs the same way.
    expect(JSON.stringify(out.toolCallLog.map((s) => ("toolOutput" in s ? s.toolOutput : undefined)))).toBe(readBack);

    // Each stored output text is the canonical text ("10" before "9"): its SHA-256 is the frame's
    // digest, its length its bytes.
    const frames = (await readJournal(second, "r")).filter(
      (x) => x.type === "frame.completed" && x.data.frameId.includes(":tool:"),
    );
    expect(frames).toHaveLength(2);
    await second.close();
    const db = new Database(path, { readonly: true });
    try {
      const texts = db
        .prepare("SELECT data FROM loom_journal WHERE run_id = 'r' AND type = 'frame.completed' ORDER BY seq")
        .pluck()
        .all() as string[];
      const stored = texts.map((t) => JSON.parse(t)).filter((d) => "digest" in d);
      expect(stored).toHaveLength(2);
      for (const [i, text] of texts.filter((t) => t.includes('"digest"')).entries()) {
        const outputText = text.slice(text.indexOf(',"output":') + ',"output":'.length, -1);
        expect(outputText).toBe(canonicalJson(output(i)));
        expect(sha256Hex(outputText)).toBe(stored[i].digest);
        expect(Buffer.byteLength(outputText)).toBe(stored[i].bytes);
      }
    } finally {
      db.close();
    }
  });

  it("dataText gives the text written with the data, and JSON.stringify's text for any other", () => {
    const data = withDataText({ frameId: "f", output: { b: 1, a: 2 } }, '{"frameId":"f","output":{"a":2,"b":1}}');
    expect(dataText("r", { type: "frame.completed", data }, 3)).toBe('{"frameId":"f","output":{"a":2,"b":1}}');
    const plain = { frameId: "f", output: { b: 1, a: 2 } };
    expect(dataText("r", { type: "frame.completed", data: plain }, 3)).toBe(JSON.stringify(plain));
  });
});

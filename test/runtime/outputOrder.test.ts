import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { showStep } from "../../src/cli/step.ts";
import { canonicalJson } from "../../src/core/canonicalJson.ts";
import { digestOf, sha256Hex } from "../../src/core/digest.ts";
import { memoryBlobStore } from "../../src/events/blobs.ts";
import { createJournal, type OpenJournal, openSqliteJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { Message } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import type { RunEvent } from "../../src/projections/events.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { rebuildToolCallLog } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { followRun } from "../../src/runtime/streaming/follow.ts";
import { loom } from "../cli/support.ts";
import { tempDir } from "../events/tmp.ts";
import { dropSchema, freshSchema, PG_URL } from "../postgres/pg.ts";

/**
 * A tool's output is fed, logged, streamed and shown with its members in the order of
 * `JSON.parse(JSON.stringify(output))` (ADR 0142 D1: the full log is the tool's JSON, byte for
 * byte), live and after a resume, on every store and with the claim-check on; its digest is
 * still taken of its canonical text (D2), which sorts the members.
 */

/** Members out of canonical order at two levels. */
const output = () => ({ total: { z: 1, amount: 19.99 }, tags: {} });
const TEXT = '{"total":{"z":1,"amount":19.99},"tags":{}}';
/** The canonical text (D2): what the lean digest is taken of. */
const CANONICAL = '{"tags":{},"total":{"amount":19.99,"z":1}}';
const STEP = "order#turn:0:tool:0";

const toolTexts = (messages: readonly Message[]) =>
  messages.filter((m) => m.role === "tool").map((m) => JSON.stringify((m as { output: unknown }).output));
const finishedTexts = (events: readonly RunEvent[]) =>
  events.flatMap((e) => (e.type === "tool-finished" ? [JSON.stringify(e.output)] : []));

/** A store kind: `open` gives a fresh journal handle on the same data each time. */
interface Backend {
  readonly name: string;
  open(): OpenJournal;
  /** Closes a handle (the memory store's data lives in its handle: it is left open). */
  release(journal: OpenJournal): Promise<void>;
}

let tmp: ReturnType<typeof tempDir>;
const schemas: string[] = [];
beforeAll(() => {
  tmp = tempDir("loom-output-order-");
});
afterAll(async () => {
  tmp.remove();
  for (const schema of schemas) await dropSchema(schema);
});

const memory = (json: boolean): Backend => {
  const store = memoryStore({ json });
  const blobs = memoryBlobStore();
  return {
    name: json ? "memory (JSON text)" : "memory",
    open: () => createJournal({ store, blobs }),
    release: async () => {},
  };
};

const sqlite = (): Backend => {
  const path = tmp.file(`order-${Math.random().toString(36).slice(2)}.db`);
  return { name: "sqlite", open: () => openSqliteJournal(path), release: (j) => j.close() };
};

const postgres = (): Backend => {
  const schema = freshSchema("order");
  schemas.push(schema);
  return {
    name: "postgres",
    open: () => openPostgresJournal(PG_URL as string, { schema }),
    release: (j) => j.close(),
  };
};

const backends: { readonly name: string; readonly make: () => Backend; readonly skip?: boolean }[] = [
  { name: "memory", make: () => memory(false) },
  { name: "memory (JSON text)", make: () => memory(true) },
  { name: "sqlite", make: sqlite },
  // Skipped without LOOM_PG_URL, as the postgres suites are (test/postgres/pg.ts).
  { name: "postgres", make: postgres, skip: PG_URL === undefined },
];

/** The loop of one process: its model fails (not retried) at `failAt`, after the tool's turn. */
function loopIn(
  journal: OpenJournal,
  claimCheck: boolean,
  fed: string[][],
  failAt?: number,
  give: () => unknown = output,
) {
  const tool: Tool = { description: "totals an order", execute: give };
  return agentLoop$({
    id: "order",
    model: scriptedModel(({ turn, request }) => {
      fed.push(toolTexts(request.messages));
      if (turn === failAt) throw Object.assign(new Error("unauthorized"), { status: 401 });
      return turn === 0
        ? { toolCalls: [{ id: "c0", name: "total", input: { order: 7 } }] }
        : { content: "done", toolCalls: [] };
    }),
    tools: { total: tool },
    retry: { model: { maxAttempts: 1 } },
    ...(claimCheck
      ? { claimCheck: { blobs: journal.blobs as NonNullable<OpenJournal["blobs"]>, thresholdBytes: 8 } }
      : {}),
  });
}

describe.each(backends)("a tool output's member order on $name", ({ make, skip }) => {
  describe.each([false, true])("claim-check %s", (claimCheck) => {
    it.skipIf(skip === true)(
      "is the tool's JSON order in the fed message, the full log, tool-finished and loom show, live and resumed",
      async () => {
        const backend = make();
        // Live: the tool runs, the model is fed its output, then the model fails and the run interrupts.
        const first = backend.open();
        const fedLive: string[][] = [];
        const liveEvents: RunEvent[] = [];
        const e = await loopIn(first, claimCheck, fedLive, 1)
          .run({ runId: "r", input: "go", journal: first, onEvent: (ev) => liveEvents.push(ev) })
          .catch((x: unknown) => x);
        if (!isAgentInterruptedError(e)) throw e;
        expect(fedLive.at(-1)).toEqual([TEXT]);
        const liveLog = e.run.toolCallLog[0] as { toolOutput: unknown };
        // Claim-checked, the log and the event hold the envelope (the output is in the blob).
        const logged = claimCheck ? undefined : TEXT;
        if (logged) {
          expect(JSON.stringify(liveLog.toolOutput)).toBe(logged);
          expect(finishedTexts(liveEvents)).toEqual([logged]);
        }
        await backend.release(first);

        // Resumed in a fresh handle: the output is read back from the store (or its blob).
        const second = backend.open();
        try {
          const fedResumed: string[][] = [];
          const out = await loopIn(second, claimCheck, fedResumed).run({ runId: "r", journal: second });
          expect(out.content).toBe("done");
          expect(fedResumed).toEqual([[TEXT]]);
          const shown = await showStep(second, STEP, "r");
          expect(JSON.stringify(shown.output)).toBe(TEXT);
          expect(shown.verified).toContain("the digest its frame recorded");
          expect(shown.verified.join("; ")).toMatch(/prompt digest of the next model call/);
          const lean = await rebuildToolCallLog(second, "r", "lean");
          expect(shown.digest).toBe(lean[0]?.digest);
          if (logged) {
            expect(JSON.stringify((out.toolCallLog[0] as { toolOutput: unknown }).toolOutput)).toBe(logged);
            const full = await rebuildToolCallLog(second, "r", "full");
            expect(JSON.stringify((full[0] as { toolOutput: unknown }).toolOutput)).toBe(logged);
            const followed: RunEvent[] = [];
            for await (const ev of followRun(second, "r")) followed.push(ev);
            expect(finishedTexts(followed)).toEqual([logged]);
            // The lean digest is the canonical text's (D2), whatever the order stored.
            expect(lean[0]?.digest).toBe(sha256Hex(CANONICAL));
            expect(lean[0]?.bytes).toBe(CANONICAL.length);
          } else {
            expect(shown.verified).toContain("the blob's sha256 in its claim-check envelope");
            const envelope = shown.claimCheck;
            expect(lean[0]?.digest).toBe(digestOf(envelope).digest);
            expect(envelope?.size).toBe(TEXT.length);
          }
        } finally {
          await backend.release(second);
        }
      },
    );
  });
});

describe("names that are array indexes", () => {
  it("come first, in numeric order, as JSON.parse lists them: fed so live and resumed, claim-checked or not", async () => {
    const ranked = () => ({ title: "page", ranks: { b: 1, 10: "ten", 9: "nine" }, id: 3 });
    const text = '{"title":"page","ranks":{"9":"nine","10":"ten","b":1},"id":3}';
    expect(JSON.stringify(JSON.parse(JSON.stringify(ranked())))).toBe(text);
    for (const claimCheck of [false, true]) {
      const path = tmp.file(`ranks-${claimCheck}.db`);
      const fedLive: string[][] = [];
      const first = openSqliteJournal(path);
      await loopIn(first, claimCheck, fedLive, 1, ranked)
        .run({ runId: "r", input: "go", journal: first })
        .catch(() => undefined);
      await first.close();
      const fedResumed: string[][] = [];
      const second = openSqliteJournal(path);
      try {
        await loopIn(second, claimCheck, fedResumed, undefined, ranked).run({ runId: "r", journal: second });
        expect([fedLive.at(-1), fedResumed.at(-1)]).toEqual([[text], [text]]);
        expect(JSON.stringify((await showStep(second, STEP, "r")).output)).toBe(text);
      } finally {
        await second.close();
      }
    }
  });
});

describe("loom show", () => {
  it("prints a tool's output in the tool's order, claim-checked or not, after a resume", async () => {
    for (const claimCheck of [false, true]) {
      const path = tmp.file(`show-${claimCheck}.db`);
      const first = openSqliteJournal(path);
      await loopIn(first, claimCheck, [], 1)
        .run({ runId: "r", input: "go", journal: first })
        .catch(() => undefined);
      await first.close();
      const second = openSqliteJournal(path);
      await loopIn(second, claimCheck, []).run({ runId: "r", journal: second });
      await second.close();
      const shown = await loom(tmp.dir, ["show", STEP, "--run", "r", "--db", path]);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toContain(JSON.stringify(output(), null, 2));
      if (!claimCheck) expect(shown.stdout).toContain(`digest  ${sha256Hex(CANONICAL)}`);
    }
  });

  it("stores an inline output as the tool's JSON text, whose canonical text is the one digested", async () => {
    const path = tmp.file("stored.db");
    const journal = openSqliteJournal(path);
    await loopIn(journal, false, []).run({ runId: "r", input: "go", journal });
    await journal.close();
    const db = new Database(path, { readonly: true });
    try {
      const texts = db
        .prepare("SELECT data FROM loom_journal WHERE run_id = 'r' AND type = 'frame.completed' ORDER BY seq")
        .pluck()
        .all() as string[];
      const tool = texts.filter((t) => t.includes('"digest"'));
      expect(tool).toHaveLength(1);
      expect(tool[0]).toContain(`"output":${TEXT}`);
      const stored = JSON.parse(tool[0] as string) as { output: unknown; digest: string; bytes: number };
      expect(canonicalJson(stored.output)).toBe(CANONICAL);
      expect([stored.digest, stored.bytes]).toEqual([sha256Hex(CANONICAL), CANONICAL.length]);
    } finally {
      db.close();
    }
  });
});

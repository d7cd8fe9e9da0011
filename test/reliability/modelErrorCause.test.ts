import { APICallError } from "@ai-sdk/provider";
import { MockLanguageModelV3 } from "ai/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromAiSdk } from "../../src/ai-sdk/aiSdk.ts";
import { errorCause } from "../../src/events/errorCause.ts";
import { createJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import type { ErrorCause } from "../../src/events/types.ts";
import { checkNewEntries } from "../../src/events/validate.ts";
import type { Model } from "../../src/models/types.ts";
import { type AgentInterruptedError, isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { foldRun } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { loom } from "../cli/support.ts";
import { tempDir } from "../events/tmp.ts";

/**
 * A failed model call used to reach the caller as `AgentInterruptedError` "model-error" and
 * nothing else: a 401 looked like a 503. The model's error is now carried as `cause`
 * (`{ name, message, status?, retryable? }`) on the error and on its `run`, journaled in
 * `run.interrupted`, so a reader after a restart (foldRun, `loom runs`, `loom show <runId>`, a
 * resume that fails again) reports the same cause.
 */

let tmp: ReturnType<typeof tempDir>;
beforeAll(() => {
  tmp = tempDir("loom-cause-");
});
afterAll(() => tmp.remove());

const SECRET = "sk-test-never-journaled";

/** What OpenAI answers a bad key with, as the AI SDK reports it (headers and body included). */
const unauthorized = () =>
  new APICallError({
    message: "Incorrect API key provided",
    url: "https://api.example.test/v1/chat/completions",
    requestBodyValues: { authorization: `Bearer ${SECRET}` },
    statusCode: 401,
    responseHeaders: { "x-request-id": "req_1", "www-authenticate": `Bearer ${SECRET}` },
    responseBody: `{"error":{"message":"Incorrect API key provided: ${SECRET}"}}`,
  });

const CAUSE_401: ErrorCause = {
  name: "AI_APICallError",
  message: "Incorrect API key provided",
  status: 401,
  retryable: false,
};

/** A loop on the AI SDK adapter whose provider throws what `fail()` gives. */
function aiSdkLoop(fail: () => unknown) {
  let calls = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      calls++;
      throw fail();
    },
  });
  return { loop: agentLoop$({ id: "assistant", model: fromAiSdk(model) }), calls: () => calls };
}

async function interrupted(p: Promise<unknown>): Promise<AgentInterruptedError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  if (!isAgentInterruptedError(e)) throw new Error(`expected AgentInterruptedError, got ${String(e)}`);
  return e;
}

describe("the model's error is the interruption's cause", () => {
  it("a 401 from the AI SDK: name, message, status and retryable on the error, on run, and in the journal", async () => {
    const journal = createJournal({ store: memoryStore({ json: true }) });
    const { loop } = aiSdkLoop(unauthorized);
    const e = await interrupted(loop.run({ runId: "r", journal, input: "hi" }));
    expect(e.run.reason).toBe("model-error");
    expect(e.cause).toEqual(CAUSE_401);
    expect(e.run.cause).toEqual(CAUSE_401);
    expect(e.message).toContain(
      "run r interrupted (model-error): the model call failed: AI_APICallError (status 401, not retryable): Incorrect API key provided",
    );
    const last = (await readJournal(journal, "r")).at(-1);
    expect(last).toMatchObject({ type: "run.interrupted", data: { reason: "model-error", cause: CAUSE_401 } });
    // Headers, request and response bodies stay out of the journal: only the cause's four fields.
    expect(JSON.stringify(await readJournal(journal, "r"))).not.toContain(SECRET);
  });

  it("fetch-like errors: `status`, and the network error under a bare 'fetch failed'", async () => {
    const rateLimited = Object.assign(new Error("Rate limit reached"), { name: "RateLimitError", status: 429 });
    const network = new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED 127.0.0.1:9") });
    for (const [thrown, cause] of [
      [rateLimited, { name: "RateLimitError", message: "Rate limit reached", status: 429, retryable: true }],
      [network, { name: "TypeError", message: "fetch failed: connect ECONNREFUSED 127.0.0.1:9", retryable: true }],
      ["a bare string", { name: "Error", message: "a bare string", retryable: false }],
      [
        { statusCode: 999, status: "503", isRetryable: "yes" },
        { name: "Error", message: "[object Object]", retryable: false },
      ],
    ] as const) {
      const journal = createJournal({ store: memoryStore({ json: true }) });
      const model: Model = {
        generate: async () => {
          throw thrown;
        },
      };
      // One attempt: the cause is what this test is about (retries: test/runtime/retry.test.ts).
      const loop = agentLoop$({ id: "m", model, retry: { model: { maxAttempts: 1 } } });
      const e = await interrupted(loop.run({ runId: "r", journal, input: "hi" }));
      expect(e.cause).toEqual(cause);
      expect((await foldRun(journal, "r")).interruption?.cause).toEqual(cause);
    }
  });

  it("a model error whose getters throw still interrupts the run with a cause (it does not fail it)", async () => {
    const hostile = {
      get name(): string {
        throw new Error("no name");
      },
      get message(): string {
        throw new Error("no message");
      },
    };
    expect(errorCause(hostile)).toEqual({ name: "Error", message: "[object Object]" });
    const model: Model = {
      generate: async () => {
        throw hostile;
      },
    };
    const journal = createJournal({ store: memoryStore({ json: true }) });
    const e = await interrupted(agentLoop$({ id: "m", model }).run({ runId: "r", journal, input: "hi" }));
    expect(e.cause).toEqual({ name: "Error", message: "[object Object]", retryable: false });
  });

  it("keeps a long message to 2,000 characters", () => {
    const cause = errorCause(new Error("x".repeat(50_000)));
    expect(cause.message).toHaveLength(2_000);
    expect(cause.message.endsWith("…")).toBe(true);
  });
});

describe("the cause after a restart", () => {
  it("is rebuilt from a reopened SQLite file: foldRun, loom runs, loom show <runId>, and a resume that fails again", async () => {
    const file = tmp.file("cause.db");
    const first = openSqliteJournal(file);
    const e1 = await interrupted(aiSdkLoop(unauthorized).loop.run({ runId: "r-401", journal: first, input: "hi" }));
    await first.close();

    const reopened = openSqliteJournal(file); // as a fresh process finds it
    try {
      const state = await foldRun(reopened, "r-401");
      expect(state.status).toBe("interrupted");
      expect(state.interruption?.cause).toEqual(CAUSE_401);

      const again = aiSdkLoop(unauthorized); // the key is still wrong
      const e2 = await interrupted(again.loop.run({ runId: "r-401", journal: reopened }));
      expect(again.calls()).toBe(1);
      expect(e2.cause).toEqual(e1.cause);
      expect(e2.run).toEqual(e1.run);
      const interruptions = (await readJournal(reopened, "r-401")).filter((x) => x.type === "run.interrupted");
      expect(interruptions.map((x) => x.data.cause)).toEqual([CAUSE_401, CAUSE_401]);
    } finally {
      await reopened.close();
    }

    const runs = await loom(tmp.dir, ["runs", "--db", file]);
    expect(runs.code).toBe(0);
    expect(runs.stdout).toMatch(
      /^run\s+loop\s+status\s+model calls\s+tokens in\/out\s+entries\s+journal\s+log\s+started\s+stopped$/m,
    );
    expect(runs.stdout).toMatch(
      /r-401\s+assistant\s+interrupted\s.*model-error: AI_APICallError \(status 401, not retryable\): Incorrect API key provided/,
    );
    const json = JSON.parse((await loom(tmp.dir, ["runs", "--db", file, "--json"])).stdout);
    expect(json[0]).toMatchObject({ runId: "r-401", interrupted: { reason: "model-error", cause: CAUSE_401 } });

    const show = await loom(tmp.dir, ["show", "r-401", "--db", file]);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(
      "stopped interrupted: model-error: AI_APICallError (status 401, not retryable): Incorrect API key provided",
    );
    const log = await loom(tmp.dir, ["log", "r-401", "--db", file]);
    expect(log.stdout.split("\n")[0]).toContain("· interrupted (model-error: AI_APICallError (status 401");
  });

  it("a journal written before `cause` existed (name and message in detail) folds to the same cause", async () => {
    const store = memoryStore({ json: true });
    await store.append(
      "old",
      [
        { type: "run.started", data: { loopId: "m", input: "hi", tools: [] } },
        { type: "frame.started", data: { frameId: "m#turn:0:model", effect: "model", inputDigest: "0".repeat(64) } },
        {
          type: "run.interrupted",
          data: { reason: "model-error", detail: { frameId: "m#turn:0:model", name: "TypeError", message: "boom" } },
        },
      ],
      { expectedVersion: 0 },
    );
    const state = await foldRun(createJournal({ store }), "old");
    expect(state.interruption?.cause).toEqual({ name: "TypeError", message: "boom" });
  });

  it("a damaged cause in the journal is refused, not folded", () => {
    for (const cause of [{ name: "E" }, { name: "E", message: "m", status: "401" }, { name: 1, message: "m" }]) {
      const entry = { type: "run.interrupted", data: { reason: "model-error", detail: null, cause } } as never;
      expect(() => checkNewEntries("r", [entry], 0)).toThrow(/data\.cause/);
    }
  });
});

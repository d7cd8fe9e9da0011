import { describe, expect, it } from "vitest";
import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import {
  isNotPostgresJournalError,
  isRateLimitConfigError,
  openPostgresJournal,
  sharedRateLimit,
} from "../../src/postgres.ts";
import { dropSchema, freshSchema, PG_URL } from "./pg.ts";

// The shared limit across worker processes is in fleet.test.ts (it needs a server); these need none.
describe("sharedRateLimit, its settings", () => {
  const model = scriptedModel([{ content: "hi", toolCalls: [] }]);
  const journal = createJournal({ store: memoryStore() });

  it("refuses a limit that is not above 0, naming the key and the setting", () => {
    const attempt = () => sharedRateLimit(model, { journal, key: "openai", requestsPerMinute: 0 });
    expect(attempt).toThrow(/sharedRateLimit "openai": requestsPerMinute is 0/);
    try {
      attempt();
    } catch (e) {
      expect(isRateLimitConfigError(e)).toBe(true);
      expect((e as { code?: string }).code).toBe("rateLimitConfig");
    }
  });

  it("refuses no limit at all", () => {
    expect(() => sharedRateLimit(model, { journal, key: "k" })).toThrow(/requestsPerMinute, tokensPerMinute or both/);
  });

  it("needs a journal on PostgreSQL, whose database holds the bucket", () => {
    try {
      sharedRateLimit(model, { journal, key: "k", tokensPerMinute: 1000 });
      expect.unreachable();
    } catch (e) {
      expect(isNotPostgresJournalError(e)).toBe(true);
    }
  });
});

describe.skipIf(PG_URL === undefined)("sharedRateLimit, tokens", () => {
  it("a call's usage is taken when it answers: the next call waits until the balance is positive again", async () => {
    const schema = freshSchema("tokens");
    const journal = openPostgresJournal(PG_URL as string, { schema });
    try {
      const started: number[] = [];
      const waits: number[] = [];
      const model = sharedRateLimit(
        scriptedModel(
          () => {
            started.push(performance.now());
            return { content: "ok", toolCalls: [], usage: { inputTokens: 20, outputTokens: 10 } };
          },
          { stream: false },
        ),
        // 10 tokens a second, 10 at most in the bucket: a call of 30 leaves it at -20, 2 s to refill.
        { journal, key: "tokens", tokensPerMinute: 600, onWait: ({ waitMs }) => waits.push(waitMs) },
      );
      const request = { messages: [], tools: [], signal: new AbortController().signal };
      await model.generate(request);
      await model.generate(request);
      expect(started).toHaveLength(2);
      expect(started[1]! - started[0]!).toBeGreaterThanOrEqual(1500);
      expect(waits.length).toBeGreaterThan(0);
    } finally {
      await journal.close();
      await dropSchema(schema);
    }
  });
});

import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { memoryArchive } from "../../src/events/archive.ts";
import { payloadCodec, staticKeys } from "../../src/events/codec/codec.ts";
import { withCodec } from "../../src/events/codec/codecStore.ts";
import { memoryDataKeys } from "../../src/events/dataKeys.ts";
import { createJournal } from "../../src/events/journal.ts";
import { memoryStore } from "../../src/events/memory.ts";
import { redaction, withRedaction } from "../../src/events/redaction/redact.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { isSessionBusyError, type SessionBusyError } from "../../src/runtime/run/sessions.ts";

/**
 * A session whose last message's run stopped for its budget on a redacted journal: where the
 * originals are kept its busy error advises the resume, which lets the session go on; where none
 * is kept the run can never be resumed, so its message has ended and the next one goes on.
 */

const codec = payloadCodec({ encrypt: { keys: staticKeys({ current: "k1", keys: { k1: randomBytes(32) } }) } });

const loop = () =>
  agentLoop$({
    id: "desk",
    model: scriptedModel(({ turn }) =>
      turn === 0
        ? { toolCalls: [{ id: "a", name: "lookup", input: {} }], usage: { inputTokens: 100, outputTokens: 1 } }
        : { content: "found it", toolCalls: [], usage: { inputTokens: 100, outputTokens: 1 } },
    ),
    tools: { lookup: { description: "a record", execute: () => ({ ssn: "000-12-3456" }) } },
  });

async function stoppedSession(keep: boolean) {
  const plain = createJournal({
    store: memoryStore({ json: true }),
    archive: memoryArchive(),
    dataKeys: memoryDataKeys(),
  });
  const journal = withRedaction(
    withCodec(plain, codec),
    redaction({ paths: ["$..ssn"] }),
    keep ? { keepOriginals: { codec } } : {},
  );
  await loop()
    .send({ sessionId: "s", journal, message: "find it", budget: { inputTokens: 100 } })
    .catch(() => {});
  return journal;
}

describe("a session stopped on a redacted run", () => {
  it("with no original kept, the run can never be resumed: its message has ended and the next one goes on", async () => {
    const journal = await stoppedSession(false);
    const next = await loop().send({ sessionId: "s", journal, message: "and then?" });
    expect(next.runId).toBe("s/1");
  });

  it("with originals kept, it advises the resume, which works, and the session goes on", async () => {
    const journal = await stoppedSession(true);
    const busy = (await loop()
      .send({ sessionId: "s", journal, message: "and then?" })
      .catch((e: unknown) => e)) as SessionBusyError;
    expect(isSessionBusyError(busy)).toBe(true);
    expect(busy.message).toContain('Resume it with loop.run({ runId: "s/0", journal })');
    expect((await loop().run({ runId: "s/0", journal, budget: { inputTokens: 1000 } })).content).toBe("found it");
    const next = await loop().send({ sessionId: "s", journal, message: "and then?" });
    expect(next.runId).toBe("s/1");
  });
});

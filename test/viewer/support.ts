import { join } from "node:path";
import {
  agentLoop$,
  isAgentInterruptedError,
  type Journal,
  type OpenJournal,
  openSqliteJournal,
  scriptedModel,
} from "../../src/index.ts";
import { kitchenSink } from "../support/kitchenSink.ts";

/**
 * A journal file with a run of each kind the viewer shows:
 * - `sink-1`: the reliability scenario (settled, failed, declined, approved, claim-checked calls), completed, lean;
 * - `wait-1`: interrupted, one call waiting for an approval;
 * - `flaky-1`: two failed model attempts (retried), then an answer.
 */
export async function viewerJournal(dir: string): Promise<string> {
  const db = join(dir, "viewer.db");
  const journal = openSqliteJournal(db);
  try {
    const sink = kitchenSink({ turns: 5, mode: "lean", blobs: journal.blobs as NonNullable<Journal["blobs"]> });
    await sink.loop.run({ runId: "sink-1", journal, input: "go" });
    await waitingRun(journal, "wait-1");
    await flakyRun(journal, "flaky-1");
  } finally {
    await journal.close();
  }
  return db;
}

/** The refund loop: `lookup` at turn 0, `refund` (which asks for an approval) at turn 1, then an answer. */
export function supportLoop(approve?: () => "pending") {
  return agentLoop$({
    id: "support",
    model: scriptedModel([
      {
        content: "looking",
        toolCalls: [{ id: "a", name: "lookup", input: { order: "A-17" } }],
        usage: { inputTokens: 120, outputTokens: 9 },
      },
      {
        content: "refunding",
        toolCalls: [{ id: "b", name: "refund", input: { order: "A-17", euros: 40 } }],
        usage: { inputTokens: 180, outputTokens: 12 },
      },
      { content: "refunded", toolCalls: [], usage: { inputTokens: 220, outputTokens: 4 } },
    ]),
    tools: {
      lookup: { description: "finds an order", execute: (input) => ({ ...(input as object), paid: 40 }) },
      refund: { description: "refunds an order", requiresApproval: true, execute: () => ({ refunded: true }) },
    },
    ...(approve ? { approve } : {}),
  });
}

/** A run interrupted for an approval of `refund` at turn 1 (turn 0 called `lookup`). */
export async function waitingRun(journal: Journal, runId: string): Promise<void> {
  try {
    await supportLoop(() => "pending").run({ runId, journal, input: "refund A-17" });
  } catch (e) {
    if (!isAgentInterruptedError(e)) throw e;
  }
}

/** A run whose model fails twice (retryable, 503) before it answers. */
async function flakyRun(journal: OpenJournal, runId: string): Promise<void> {
  let calls = 0;
  const loop = agentLoop$({
    id: "flaky",
    model: {
      async generate() {
        calls++;
        if (calls <= 2) throw Object.assign(new Error("service unavailable"), { statusCode: 503, isRetryable: true });
        return { content: "fine now", toolCalls: [] };
      },
    },
    retry: { model: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 2, factor: 1, jitter: 0 } },
  });
  await loop.run({ runId, journal, input: "hello" });
}

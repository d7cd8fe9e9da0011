import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { payloadCodec, staticKeys } from "../../src/events/codec/codec.ts";
import { CLEAR_DECISION_SOURCES, withCodec } from "../../src/events/codec/codecStore.ts";
import { DECISION_SOURCES } from "../../src/events/ids.ts";
import { type OpenJournal, openSqliteJournal, readJournal } from "../../src/events/journal.ts";
import { redaction, withRedaction } from "../../src/events/redaction/redact.ts";
import type { Message } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { summarize } from "../../src/policies/context.ts";
import { openPostgresJournal } from "../../src/postgres.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { isAgentInterruptedError } from "../../src/runtime/base/errors.ts";
import { recordApproval } from "../../src/runtime/control/approvals.ts";
import { deliverEvent } from "../../src/runtime/control/events.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { dropSchema, freshSchema, PG_URL, sql } from "../postgres/pg.ts";
import { tempDir } from "./tmp.ts";

/**
 * Every payload goes through the codec and the redaction: a run with the long-lived features on
 * (gzip + AES codec, value redaction, a context policy that summarizes, claim-check, an approval
 * with a reason, a delivered event, a failing tool that is retried) leaves none of the strings
 * only its payloads held in the bytes the store keeps: the SQLite file (and its WAL), or the rows
 * of PostgreSQL's tables.
 */

const SSN = "123-45-6789";
const PIN = "PIN 424242";
/** Strings each of which only a payload held (a model response, an output, a summary, a reason…). */
const MARKERS = {
  input: "INPUT-MARKER-7Q2",
  approvalReason: "APPROVAL-REASON-MARKER-5K1",
  transferOutput: "TRANSFER-OUTPUT-MARKER-8H3",
  delivered: "DELIVERED-PAYLOAD-MARKER-2W9",
  toolOutput: "TOOL-OUTPUT-MARKER-4R6",
  toolError: "TOOL-ERROR-MARKER-9J4",
  summary: "SUMMARY-MARKER-3N8",
  modelText: "MODEL-TEXT-MARKER-6V5",
  answer: "ANSWER-MARKER-1D7",
  callInput: "CALL-INPUT-MARKER-0T3",
};
const SECRETS = [SSN, "424242", ...Object.values(MARKERS)];

const lastToolName = (messages: readonly Message[]): string | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role === "tool") return m.toolName;
  }
  return undefined;
};

/** The run: transfer (approved, with a reason), a wait for a payment event, a lookup, a failing tool, the answer. */
function desk(tokens: string[]) {
  const model = scriptedModel(({ messages }) => {
    const first = messages[0];
    if (first?.role === "system" && first.content.startsWith("Summarize"))
      return { content: `${MARKERS.summary}: customer ${SSN}, ${PIN}`, toolCalls: [] };
    const call = (name: string, input: unknown) => ({
      content: `${MARKERS.modelText} next: ${name}`,
      toolCalls: [{ id: name, name, input }],
    });
    switch (lastToolName(messages)) {
      case undefined:
        return call("transfer", { amount: 5, memo: MARKERS.callInput });
      case "transfer":
        return call("awaitPayment", { order: "o-1" });
      case "awaitPayment":
        return call("lookup", { who: "Ada" });
      case "lookup":
        return call("broken", { why: "to fail" });
      default:
        return { content: `${MARKERS.answer}: Ada is ${SSN}, ${PIN}`, toolCalls: [] };
    }
  });
  const tools: Record<string, Tool> = {
    transfer: {
      description: "moves money",
      requiresApproval: true,
      execute: () => ({ moved: MARKERS.transferOutput }),
    },
    awaitPayment: {
      description: "waits for the payment webhook",
      execute: (_input, ctx) => {
        const wait = ctx.waitForEvent({ what: "payment" });
        tokens.push(wait.token);
        return wait;
      },
    },
    lookup: {
      description: "finds a customer",
      execute: () => ({ ssn: SSN, pin: PIN, note: MARKERS.toolOutput, pad: "x".repeat(2000) }),
    },
    broken: {
      description: "always fails",
      retry: { maxAttempts: 2, initialDelayMs: 0, maxDelayMs: 0, factor: 2, jitter: 0 },
      execute: () => {
        throw new Error(`${MARKERS.toolError} for ${SSN}`);
      },
    },
  };
  return { model, tools };
}

/** Runs the scenario on `journal` (redaction over the codec over the store), through its two stops. */
async function runDesk(base: OpenJournal): Promise<void> {
  const keys = staticKeys({ current: "k1", keys: { k1: randomBytes(32) } });
  const journal = withRedaction(
    withCodec(base, payloadCodec({ compress: "gzip", encrypt: { keys } })),
    redaction({ values: [/\b\d{3}-\d{2}-\d{4}\b/, /\b\d{6}\b/] }),
  );
  const tokens: string[] = [];
  const loop = () => {
    const { model, tools } = desk(tokens);
    return agentLoop$({
      id: "desk",
      model,
      tools,
      context: summarize({ keepTurns: 1, every: 1 }),
      claimCheck: { blobs: journal.blobs as NonNullable<typeof journal.blobs>, thresholdBytes: 1024 },
    });
  };
  const runId = "desk-1";
  const first = await loop()
    .run({ runId, journal, input: `help ${MARKERS.input}` })
    .catch((e: unknown) => e);
  expect(isAgentInterruptedError(first) && first.run.reason).toBe("approval-pending");
  await recordApproval(journal, runId, "desk#turn:0:tool:0", { approved: true, reason: MARKERS.approvalReason });
  const second = await loop()
    .run({ runId, journal })
    .catch((e: unknown) => e);
  expect(isAgentInterruptedError(second) && second.run.reason).toBe("waiting");
  await deliverEvent(journal, tokens.at(-1) as string, { paid: MARKERS.delivered });
  const out = await loop().run({ runId, journal });
  expect(out.content).toContain(MARKERS.answer); // live, the caller gets the original

  // Read back through the codec, the run holds every feature's payload (the scenario did what it says).
  const read = JSON.stringify(await readJournal(journal, runId));
  for (const m of [
    MARKERS.approvalReason,
    MARKERS.delivered,
    MARKERS.summary,
    MARKERS.toolError,
    MARKERS.answer,
    MARKERS.callInput,
  ])
    expect(read, m).toContain(m);
  expect(read).toContain('"source":"context-policy"');
  expect(read).toContain('"type":"attempt.failed"');
  expect(read).toContain('"claimChecked":true');
  expect(read).not.toContain(SSN); // redacted before it was encoded
}

const leaks = (bytes: string) => SECRETS.filter((s) => bytes.includes(s));

describe("every payload goes through the codec and the redaction", () => {
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it("SQLite: the file's bytes (and its WAL's) hold none of the strings only payloads held", async () => {
    const tmp = tempDir();
    cleanups.push(() => tmp.remove());
    const path = tmp.file("desk.db");
    const base = openSqliteJournal(path);
    await runDesk(base);
    await base.close(); // checkpoints the WAL into the file
    const files = [path, `${path}-wal`].filter(existsSync);
    const bytes = files.map((f) => readFileSync(f).toString("latin1")).join("\n");
    expect(bytes).toContain("desk#turn:0:tool:0"); // ids stay in the clear
    expect(leaks(bytes)).toEqual([]);
  });

  it("SQLite: a model error's message (in the interruption's detail and cause) is a payload too", async () => {
    const tmp = tempDir();
    cleanups.push(() => tmp.remove());
    const path = tmp.file("failing.db");
    const base = openSqliteJournal(path);
    const keys = staticKeys({ current: "k1", keys: { k1: randomBytes(32) } });
    const journal = withCodec(base, payloadCodec({ encrypt: { keys } }));
    const marker = "MODEL-ERROR-MARKER-5S2";
    const loop = agentLoop$({
      id: "failing",
      model: scriptedModel(() => {
        throw new Error(`the provider refused: ${marker}`);
      }),
      retry: { model: { maxAttempts: 1 } },
    });
    const stopped = await loop.run({ runId: "f-1", journal, input: "hi" }).catch((e: unknown) => e);
    expect(isAgentInterruptedError(stopped) && stopped.run.reason).toBe("model-error");
    const read = JSON.stringify(await readJournal(journal, "f-1"));
    expect(read).toContain(
      `"detail":{"frameId":"failing#turn:0:model","name":"Error","message":"the provider refused: ${marker}"}`,
    );
    await base.close();
    const bytes = [path, `${path}-wal`]
      .filter(existsSync)
      .map((f) => readFileSync(f).toString("latin1"))
      .join("\n");
    expect(bytes).toContain("model-error"); // the reason stays in the clear
    expect(bytes).not.toContain(marker);
  });

  // Skipped without LOOM_PG_URL: there is no PostgreSQL server whose rows to read.
  it.skipIf(PG_URL === undefined)(
    "PostgreSQL: no row of the journal's tables holds the strings only payloads held",
    async () => {
      const schema = freshSchema("coverage");
      cleanups.push(() => dropSchema(schema));
      const base = openPostgresJournal(PG_URL as string, { schema });
      cleanups.push(() => base.close());
      await runDesk(base);
      const tables = await sql<{ table_name: string }>(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
        [schema],
      );
      expect(tables.length).toBeGreaterThan(0);
      let text = "";
      for (const { table_name } of tables) {
        const rows = await sql<{ row: string }>(`SELECT t::text AS row FROM "${schema}"."${table_name}" t`);
        text += rows.map((r) => r.row).join("\n");
        // bytea columns print as hex in a row's text: read them as UTF-8 too.
        const bytea = await sql<{ column_name: string }>(
          "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND data_type = 'bytea'",
          [schema, table_name],
        );
        for (const { column_name } of bytea) {
          const blobs = await sql<{ b: Buffer | null }>(
            `SELECT "${column_name}" AS b FROM "${schema}"."${table_name}"`,
          );
          text += blobs.map((r) => r.b?.toString("latin1") ?? "").join("\n");
        }
      }
      expect(text).toContain("desk#turn:0:tool:0");
      expect(leaks(text)).toEqual([]);
    },
  );

  it("keeps in the clear only the decisions that are the run's own bookkeeping", () => {
    expect([...CLEAR_DECISION_SOURCES].sort()).toEqual(
      [
        DECISION_SOURCES.modePin,
        DECISION_SOURCES.toolList,
        DECISION_SOURCES.traceContext,
        DECISION_SOURCES.deadline,
        "budget-model",
      ].sort(),
    );
    for (const content of [
      DECISION_SOURCES.approval,
      DECISION_SOURCES.outcome,
      DECISION_SOURCES.wait,
      DECISION_SOURCES.context,
    ])
      expect(CLEAR_DECISION_SOURCES.has(content), content).toBe(false);
  });
});

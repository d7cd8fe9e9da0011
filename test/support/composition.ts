import { payloadCodec, staticKeys } from "../../src/events/codec/codec.ts";
import { withCodec } from "../../src/events/codec/codecStore.ts";
import { redaction, withRedaction } from "../../src/events/redaction/redact.ts";
import type { Journal } from "../../src/events/spi.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import type { Message, ModelResponse, ToolCall } from "../../src/models/types.ts";
import type { Budget } from "../../src/policies/budget.ts";
import { summarize } from "../../src/policies/context.ts";
import type { Tool } from "../../src/runtime/base/config.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { agentTool } from "../../src/runtime/run/agentTool.ts";

/**
 * The composition scenario: one agent with every long-lived feature that can be turned on, each
 * switched by name so a suite turns them on together (all of them, or each pair). A message's
 * run gathers (a large `fetch` beside two `research` sub-agents), takes a `note`, asks a person before a `transfer`,
 * naps a day (a durable sleep), waits for a payment event, then answers; a context policy
 * summarizes what falls out of the last turn; a budget holds each run to what an uninterrupted
 * run spends; outputs above 1 kB are claim-checked; the journal is gzip-compressed, encrypted and
 * redacted; the loop writes compact snapshots. Three messages make a session.
 *
 * Everything the model says is a pure function of what it is sent, and everything the outside
 * world does (the clock, the tokens handed out, the tools' executions) goes through a
 * {@link World} that outlives a crash, so a run resumed anywhere must end as an uninterrupted one.
 */

export const FEATURES = [
  "session",
  "subAgent",
  "approval",
  "sleep",
  "eventWait",
  "summarize",
  "budget",
  "claimCheck",
  "codec",
  "redaction",
  "compactSnapshots",
] as const;

export type Feature = (typeof FEATURES)[number];

/** Strings only payloads hold: none may be found in a store's bytes when the codec is on. */
export const SECRETS = {
  message: "zq-user-message-secret",
  fetched: "zq-fetched-page-secret",
  childPrompt: "zq-child-prompt-secret",
  childFound: "zq-child-found-secret",
  approvalReason: "zq-approval-reason-secret",
  delivered: "zq-delivered-payload-secret",
  summary: "zq-summary-secret",
  answer: "zq-final-answer-secret",
} as const;

/** Values redaction must replace: never in a store's bytes, nor in what the journal reads back. */
export const REDACTED = {
  /** Reached by the path `$..email`. */
  email: "zq.person@example.com",
  /** Reached by its value (a card number's shape), wherever it is. */
  card: "4111-2222-3333-4444",
} as const;

const CARD_SHAPE = /\b\d{4}-\d{4}-\d{4}-\d{4}\b/g;

/** The 32-byte key the codec encrypts under: fixed, so a worker process reads what another wrote. */
export const COMPOSITION_KEY = Buffer.alloc(32, 7);

export const CLAIM_CHECK_BYTES = 1024;
export const DAY_MS = 86_400_000;
/** The fake clock's start: every run of the scenario starts here, whatever the real time. */
export const CLOCK_START = Date.UTC(2026, 0, 5, 9);
export const SESSION_ID = "chat";
/** What the payment provider delivers: above the claim-check threshold, as a large webhook body is. */
export const DELIVERED_PAYLOAD = { paid: 4200, note: SECRETS.delivered, receipt: "line item ".repeat(120) };
export const APPROVAL_REASON = `the amount is fine (${SECRETS.approvalReason})`;

/**
 * What outlives a crash beside the store: the clock waits are judged by, the event tokens the
 * tools handed out (as a payment provider keeps a webhook), and a record of every tool execution.
 */
export interface World {
  now(): number;
  advanceTo(ms: number): void;
  /** A tool is about to run (`runId`, `stepId`): recorded before it does anything. */
  executed(runId: string, stepId: string): void;
  handedOut(runId: string, stepId: string, token: string): void;
  /** The last token handed out for a step (the one its journaled wait answers to). */
  tokenOf(runId: string, stepId: string): string | undefined;
  /** Told each model call as it is made (`model lead`, `model researcher`): a place a kill can land. */
  modelCalled?(loopId: string): void;
}

/** A world in memory, for crashes inside one process. `executions` lists `<runId> <stepId>` in order. */
export function memoryWorld() {
  let clock = CLOCK_START;
  const executions: string[] = [];
  const tokens = new Map<string, string>();
  const world: World & { readonly executions: string[] } = {
    executions,
    now: () => clock,
    advanceTo: (ms) => {
      clock = Math.max(clock, ms);
    },
    executed: (runId, stepId) => executions.push(`${runId} ${stepId}`),
    handedOut: (runId, stepId, token) => tokens.set(`${runId} ${stepId}`, token),
    tokenOf: (runId, stepId) => tokens.get(`${runId} ${stepId}`),
  };
  return world;
}

/**
 * Value redaction, in one place: today a redact function that replaces every string shaped like
 * a card number, plus the path `$..email`. Once `redaction()` takes values or patterns, pass
 * `CARD_SHAPE` there instead of the function.
 */
export function compositionRedaction() {
  return redaction({ paths: ["$..email"], values: [CARD_SHAPE] });
}

/** The journal the scenario runs on: `base` behind the codec, then redaction, as features say. */
export function compositionJournal<J extends Journal>(base: J, features: ReadonlySet<Feature>): J {
  let journal = base;
  const keys = staticKeys({ current: "k1", keys: { k1: COMPOSITION_KEY } });
  const codec = payloadCodec({ compress: "gzip", minBytes: 1, encrypt: { keys } });
  if (features.has("codec")) journal = withCodec(journal, codec);
  // The originals of what is redacted are kept, encrypted under a key of the run's own, so a
  // redacted run resumes (with or without the codec on the rest of the journal).
  if (features.has("redaction")) journal = withRedaction(journal, compositionRedaction(), { keepOriginals: { codec } });
  return journal;
}

/** The stages of a message's run, in order: each a turn of the model (the last one answers). */
export function stagesOf(features: ReadonlySet<Feature>): string[] {
  return [
    "fetch",
    "note",
    ...(features.has("approval") ? ["transfer"] : []),
    ...(features.has("sleep") ? ["nap"] : []),
    ...(features.has("eventWait") ? ["awaitPayment"] : []),
    "answer",
  ];
}

const USAGE = { inputTokens: 100, outputTokens: 10 };

/** The message index a call is for: every tool input the model writes carries it as `k`. */
function messageOf(messages: readonly Message[]): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Message;
    if (m.role === "user" && typeof m.content === "string") {
      const k = /message (\d+)/.exec(m.content)?.[1];
      if (k !== undefined) return Number(k);
    }
    if (m.role === "assistant") {
      for (const call of m.toolCalls ?? []) {
        const k = (call.input as { k?: unknown } | null)?.k;
        if (typeof k === "number") return k;
      }
    }
  }
  return -1;
}

/** The parent's model: the next stage after the last one it sees in its prompt. */
function leadModel(features: ReadonlySet<Feature>, world: World) {
  const stages = stagesOf(features);
  return scriptedModel(({ messages }): ModelResponse => {
    world.modelCalled?.("lead");
    const system = messages[0];
    if (system?.role === "system" && system.content.startsWith("Summarize")) {
      return { content: `so far: ${messages.length - 1} messages (${SECRETS.summary})`, toolCalls: [], usage: USAGE };
    }
    const k = messageOf(messages);
    const last = messages.at(-1);
    let stage = 0;
    if (last?.role !== "user") {
      const asked = messages.findLast((m) => m.role === "assistant" && (m.toolCalls?.length ?? 0) > 0);
      const name = asked?.role === "assistant" ? asked.toolCalls?.[0]?.name : undefined;
      stage = name === undefined ? stages.length - 1 : stages.indexOf(name) + 1;
    }
    const at = stages[stage] ?? "answer";
    const call = (name: string, input: Record<string, unknown>, i = 0): ToolCall => ({
      id: `m${k}.${at}.${i}`,
      name,
      input: { k, ...input },
    });
    switch (at) {
      case "fetch":
        return {
          content: `gathering for message ${k}`,
          toolCalls: [
            call("fetch", { page: k }),
            // Two sub-agents at once: their spending is what a budget must hold together.
            ...(features.has("subAgent")
              ? [1, 2].map((part) =>
                  call("research", { prompt: `look into message ${k}, part ${part} (${SECRETS.childPrompt})` }, part),
                )
              : []),
          ],
          usage: USAGE,
        };
      case "answer":
        return { content: `answer to message ${k} (${SECRETS.answer})`, toolCalls: [], usage: USAGE };
      default:
        return { content: `${at} for message ${k}`, toolCalls: [call(at, {})], usage: USAGE };
    }
  });
}

/** The sub-agent: one lookup, then its answer. */
function researcher(world: World) {
  const model = scriptedModel(({ messages }): ModelResponse => {
    world.modelCalled?.("researcher");
    if (messages.at(-1)?.role === "tool")
      return { content: `found it (${SECRETS.childFound})`, toolCalls: [], usage: USAGE };
    return { toolCalls: [{ id: "r0", name: "lookup", input: { q: "ledger" } }], usage: USAGE };
  });
  const lookup: Tool = {
    description: "looks a record up",
    execute: (_input, { runId, stepId }) => {
      world.executed(runId ?? "?", stepId);
      return { record: "ledger 7", found: SECRETS.childFound };
    },
  };
  return agentLoop$({ id: "researcher", model, tools: { lookup } });
}

/** The tools of the lead loop; each records its execution in the world before anything else. */
function leadTools(features: ReadonlySet<Feature>, world: World): Record<string, Tool> {
  const tools: Record<string, Tool> = {
    fetch: {
      description: "fetches a page of records",
      execute: (input, { runId, stepId }) => {
        world.executed(runId ?? "?", stepId);
        const { page } = input as { page: number };
        // Above the claim-check threshold: 2 kB of records.
        const body = `${"record ".repeat(300)}#${page} ${SECRETS.fetched}`;
        return { page, body, contact: { email: REDACTED.email }, note: `card ${REDACTED.card} on file` };
      },
    },
  };
  // A plain step between gathering and the rest: every run has at least three model turns, so
  // a context policy keeping one turn has one to summarize.
  tools.note = {
    description: "notes what was gathered",
    execute: (input, { runId, stepId }) => {
      world.executed(runId ?? "?", stepId);
      return { noted: (input as { k: number }).k };
    },
  };
  if (features.has("subAgent")) {
    tools.research = agentTool(researcher(world), {
      description: "researches a question: { prompt }",
      input: (input: { prompt: string }) => input.prompt,
    });
  }
  if (features.has("approval")) {
    tools.transfer = {
      description: "moves money",
      requiresApproval: true,
      execute: (input, { runId, stepId }) => {
        world.executed(runId ?? "?", stepId);
        return { moved: 10 + (input as { k: number }).k };
      },
    };
  }
  if (features.has("sleep")) {
    tools.nap = {
      description: "waits a day",
      execute: (_input, ctx) => {
        world.executed(ctx.runId ?? "?", ctx.stepId);
        return ctx.sleep(DAY_MS, { what: "a day's pause", result: { napped: true } });
      },
    };
  }
  if (features.has("eventWait")) {
    tools.awaitPayment = {
      description: "waits for the payment",
      execute: (_input, ctx) => {
        world.executed(ctx.runId ?? "?", ctx.stepId);
        const wait = ctx.waitForEvent({ what: "the payment" });
        world.handedOut(ctx.runId ?? "?", ctx.stepId, wait.token);
        return wait;
      },
    };
  }
  return tools;
}

/** A fresh loop object for the scenario (a fresh process's): `blobs` is the claim-check store. */
export function compositionLoop(features: ReadonlySet<Feature>, world: World, journal: Journal) {
  if (features.has("claimCheck") && journal.blobs === undefined) throw new Error("claim-check needs journal.blobs");
  return agentLoop$({
    id: "lead",
    model: leadModel(features, world),
    tools: leadTools(features, world),
    maxIterations: 12,
    toolCallLog: "full",
    ...(features.has("summarize") ? { context: summarize({ keepTurns: 1, every: 1 }) } : {}),
    ...(features.has("claimCheck") && journal.blobs !== undefined
      ? { claimCheck: { blobs: journal.blobs, thresholdBytes: CLAIM_CHECK_BYTES } }
      : {}),
    ...(features.has("compactSnapshots") ? { snapshots: { every: 6, compact: true } } : {}),
  });
}

/** How many messages the scenario sends: three in a session, else one run. */
export const messagesOf = (features: ReadonlySet<Feature>) => (features.has("session") ? 3 : 1);

/** The run id of message `k`. */
export const runIdOf = (features: ReadonlySet<Feature>, k: number) =>
  features.has("session") ? `${SESSION_ID}/${k}` : `solo-${k}`;

export const messageText = (k: number) => `message ${k}: reconcile the ledger (${SECRETS.message})`;

/** The budget of each message's run, when the feature is on (what an uninterrupted run spends). */
export type BudgetOf = (k: number) => Budget | undefined;

/**
 * The budget a message's run starts under, with the budget feature on: too small to finish, so
 * the run stops for it and is resumed under the full one. It stops after the gathering turn's
 * sub-agents have answered (each makes two calls), never among them, so where it stops does not
 * depend on when a crash came.
 */
export const firstBudgetOf = (features: ReadonlySet<Feature>): Budget => ({
  modelCalls: features.has("subAgent") ? 6 : 2,
});

/**
 * The first budget of message `k`: in a session a budget sent with a message holds for the whole
 * session, so it is the session's spending before `k` (`budgetOf(k - 1)`, what the reference run
 * spent through message k - 1) plus {@link firstBudgetOf}.
 */
export function firstBudgetAt(features: ReadonlySet<Feature>, k: number, budgetOf: BudgetOf): Budget {
  const first = firstBudgetOf(features);
  const before = features.has("session") && k > 0 ? budgetOf(k - 1) : undefined;
  return before === undefined ? first : { modelCalls: (before.modelCalls ?? 0) + (first.modelCalls ?? 0) };
}

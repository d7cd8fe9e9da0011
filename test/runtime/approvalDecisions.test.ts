/**
 * Approvals beyond yes and no: a policy's answers, edit and approve, a run-wide approval of a
 * tool, one append for the calls of a response, and answers given at the same instant.
 */
import { describe, expect, it } from "vitest";
import { digestOfRecorded } from "../../src/core/digest.ts";
import {
  type AgentLoopConfig,
  type ApprovalPolicy,
  agentLoop$,
  isAgentInterruptedError,
  isApprovalInputError,
  isApprovalRefusedError,
  type Journal,
  listPendingApprovals,
  readJournal,
  recordApproval,
  recordApprovals,
  scriptedModel,
  type Tool,
} from "../../src/index.ts";
import type { ToolCall } from "../../src/models/types.ts";
import { type Feature, REDACTED } from "../support/composition.ts";
import { memoryBackend } from "../support/compositionMemory.ts";
import { jsonJournal } from "../support/loop.ts";

interface Refund {
  readonly order: string;
  readonly euros: number;
}

/** A shop whose refunds ask first; every execution is kept with the input it ran with. */
function shop(
  responses: readonly (readonly ToolCall[])[],
  config: Partial<AgentLoopConfig> = {},
  refundPolicy?: ApprovalPolicy,
) {
  const ran: { tool: string; input: unknown; stepId: string }[] = [];
  const refund: Tool<Refund> = {
    description: "refunds an order",
    requiresApproval: true,
    validateInput: (input) => {
      const euros = (input as { euros?: unknown } | null)?.euros;
      return typeof euros === "number" && euros > 0
        ? { ok: true, value: input }
        : { ok: false, message: "euros must be a positive number" };
    },
    ...(refundPolicy ? { approval: refundPolicy } : {}),
    execute: (input, { stepId }) => {
      ran.push({ tool: "refund", input, stepId });
      return { refunded: input.euros };
    },
  };
  const search: Tool<{ q: string }> = {
    description: "searches orders",
    execute: (input, { stepId }) => {
      ran.push({ tool: "search", input, stepId });
      return { hits: 1 };
    },
  };
  const model = scriptedModel([...responses.map((toolCalls) => ({ toolCalls })), { content: "done" }]);
  const loop = agentLoop$({ id: "shop", model, tools: { refund, search }, ...config });
  return { loop, ran, refund };
}

const call = (id: string, name: string, input: unknown): ToolCall => ({ id, name, input });
const step = (turn: number, index: number) => `shop#turn:${turn}:tool:${index}`;

/** The approval decision of a call as journaled, or undefined. */
async function decisionOf(journal: Journal, runId: string, stepId: string) {
  const entry = (await readJournal(journal, runId)).find(
    (e) => e.type === "decision.recorded" && e.data.decisionId === `${stepId}:approval`,
  );
  return entry?.type === "decision.recorded" ? (entry.data.choice as Record<string, unknown>) : undefined;
}

const stopped = (p: Promise<unknown>) =>
  p.then(
    (v) => {
      throw new Error(`expected the run to stop, it returned ${JSON.stringify(v)}`);
    },
    (e: unknown) => e,
  );

describe("an approval policy", () => {
  const policy: ApprovalPolicy = ({ input }) => {
    const { euros } = input as Refund;
    return euros <= 20 ? "allow" : euros > 500 ? { deny: "over 500 euros" } : "ask";
  };

  it("allows, denies with its reason, or asks a person; its answers are journaled by the policy", async () => {
    const journal = jsonJournal();
    const refunds = [call("a", "refund", { order: "A", euros: 10 }), call("b", "refund", { order: "B", euros: 900 })];
    const script = [[...refunds, call("c", "refund", { order: "C", euros: 100 })]];
    const { loop, ran } = shop(script, {}, policy);
    const e = await stopped(loop.run({ runId: "p-1", journal, input: "refund" }));
    expect(isAgentInterruptedError(e, loop)).toBe(true);
    if (!isAgentInterruptedError(e, loop)) return;
    expect(e.run.pendingApprovals.map((p) => p.stepId)).toEqual([step(0, 2)]); // only the one it asked about
    expect(ran.map((r) => r.stepId)).toEqual([step(0, 0)]);
    expect(await decisionOf(journal, "p-1", step(0, 0))).toMatchObject({ approved: true, by: "policy" });
    expect(await decisionOf(journal, "p-1", step(0, 1))).toMatchObject({
      approved: false,
      by: "policy",
      reason: "over 500 euros",
    });
    const declined = (await readJournal(journal, "p-1")).find(
      (x) => x.type === "call.settled" && x.data.stepId === step(0, 1),
    );
    expect(JSON.stringify(declined)).toContain("over 500 euros"); // what the model is told
    // A person answers the one it asked about; the policy is not asked again for the others.
    const out = await shop(script, {}, () => {
      throw new Error("asked again");
    }).loop.run({ runId: "p-1", journal, approvals: { [step(0, 2)]: { approved: true, by: "ana" } } });
    expect(out.content).toBe("done");
    expect(await decisionOf(journal, "p-1", step(0, 2))).toMatchObject({ approved: true, by: "ana" });
  });

  it("on the loop decides the calls of every tool, those without requiresApproval too", async () => {
    const journal = jsonJournal();
    const { loop, ran } = shop([[call("s", "search", { q: "A" }), call("r", "refund", { order: "A", euros: 5 })]], {
      approvalPolicy: ({ toolName }) => (toolName === "search" ? "allow" : "ask"),
    });
    const e = await stopped(loop.run({ runId: "p-2", journal, input: "go" }));
    expect(isAgentInterruptedError(e, loop) && e.run.pendingApprovals.map((p) => p.toolName)).toEqual(["refund"]);
    expect(ran.map((r) => r.tool)).toEqual(["search"]);
    expect(await decisionOf(journal, "p-2", step(0, 0))).toMatchObject({ approved: true, by: "policy" });
  });

  it("refuses an answer that is no verdict, naming the call", async () => {
    const journal = jsonJournal();
    const bad = (() => "yes") as unknown as ApprovalPolicy;
    const { loop } = shop([[call("r", "refund", { order: "A", euros: 5 })]], {}, bad);
    const e = await stopped(loop.run({ runId: "p-3", journal, input: "go" }));
    expect((e as { code?: unknown }).code).toBe("badApprovalVerdict");
    expect(String(e)).toContain(step(0, 0));
  });
});

describe("edit and approve", () => {
  const asked = call("r", "refund", { order: "A-17", euros: 900 });
  const edited = { order: "A-17", euros: 300 };

  it("runs the call with the approved input, journaling both digests, and resumes past it", async () => {
    const journal = jsonJournal();
    const script = [[asked], [call("r2", "refund", { order: "B", euros: 5 })]];
    await stopped(shop(script).loop.run({ runId: "e-1", journal, input: "refund" }));
    const first = shop(script);
    await stopped(
      first.loop.run({
        runId: "e-1",
        journal,
        approvals: { [step(0, 0)]: { approved: true, input: edited, by: "ana" } },
      }),
    );
    expect(first.ran).toEqual([{ tool: "refund", input: edited, stepId: step(0, 0) }]);
    const choice = await decisionOf(journal, "e-1", step(0, 0));
    expect(choice).toMatchObject({
      approved: true,
      by: "ana",
      inputDigest: digestOfRecorded(asked.input).digest,
      approvedInputDigest: digestOfRecorded(edited).digest,
      approvedInput: edited,
    });
    const started = (await readJournal(journal, "e-1")).find(
      (x) => x.type === "frame.started" && x.data.frameId === step(0, 0),
    );
    expect(started?.type === "frame.started" && started.data.inputDigest).toBe(digestOfRecorded(edited).digest);
    // The resume serves the edited call from its frame (no divergence, not run again).
    const second = shop(script);
    const out = await second.loop.run({ runId: "e-1", journal, approvals: { [step(1, 0)]: true } });
    expect(out.content).toBe("done");
    expect(second.ran.map((r) => r.stepId)).toEqual([step(1, 0)]);
  });

  it("refuses an input the tool refuses, by name, journaling nothing: in run({ approvals }) and recordApproval", async () => {
    const journal = jsonJournal();
    const { loop, refund } = shop([[asked]]);
    await stopped(loop.run({ runId: "e-2", journal, input: "refund" }));
    const before = (await readJournal(journal, "e-2")).length;
    const bad = { order: "A-17", euros: -5 };
    const e = await stopped(
      loop.run({ runId: "e-2", journal, approvals: { [step(0, 0)]: { approved: true, input: bad } } }),
    );
    expect(isApprovalInputError(e)).toBe(true);
    expect(String(e)).toContain("euros must be a positive number");
    const r = await stopped(recordApproval(journal, "e-2", step(0, 0), { approved: true, input: bad, tool: refund }));
    expect(isApprovalInputError(r)).toBe(true);
    expect((await readJournal(journal, "e-2")).length).toBe(before);
    // From another process: recordApproval checks it against the tool, the run then runs it.
    const recorded = await recordApproval(journal, "e-2", step(0, 0), { approved: true, input: edited, tool: refund });
    expect(recorded.approvedInputDigest).toBe(digestOfRecorded(edited).digest);
    const resumed = shop([[asked]]);
    await resumed.loop.run({ runId: "e-2", journal });
    expect(resumed.ran.map((x) => x.input)).toEqual([edited]);
  });
});

describe("a run-wide approval", () => {
  it("is journaled once with its scope and approves the tool's later calls, each journaled as approved by it", async () => {
    const journal = jsonJournal();
    const script = [
      [call("1", "refund", { order: "A", euros: 5 })],
      [call("2", "refund", { order: "B", euros: 6 }), call("3", "refund", { order: "C", euros: 7 })],
    ];
    await stopped(shop(script).loop.run({ runId: "s-1", journal, input: "refunds" }));
    const { loop, ran } = shop(script);
    const out = await loop.run({
      runId: "s-1",
      journal,
      approvals: { [step(0, 0)]: { approved: true, scope: "run" } },
    });
    expect(out.content).toBe("done");
    expect(ran.map((r) => r.stepId)).toEqual([step(0, 0), step(1, 0), step(1, 1)]);
    expect(await decisionOf(journal, "s-1", step(0, 0))).toMatchObject({
      approved: true,
      scope: "run",
      toolName: "refund",
    });
    for (const later of [step(1, 0), step(1, 1)]) {
      const choice = await decisionOf(journal, "s-1", later);
      expect(choice).toMatchObject({ approved: true, by: "scope", scopedBy: `${step(0, 0)}:approval` });
      expect(choice).not.toHaveProperty("scope");
    }
  });

  it("is not taken for another run, nor for a call approved without a scope", async () => {
    const journal = jsonJournal();
    const script = [[call("1", "refund", { order: "A", euros: 5 })], [call("2", "refund", { order: "B", euros: 6 })]];
    await stopped(shop(script).loop.run({ runId: "s-2", journal, input: "refunds" }));
    const e = await stopped(shop(script).loop.run({ runId: "s-2", journal, approvals: { [step(0, 0)]: true } }));
    expect(isAgentInterruptedError(e) && e.run.pendingApprovals.map((p) => p.stepId)).toEqual([step(1, 0)]);
    await stopped(shop(script).loop.run({ runId: "s-3", journal, input: "refunds" })); // asks again in its own run
  });
});

describe("one answer for the calls of a response", () => {
  const script = [[0, 1, 2].map((i) => call(`${i}`, "refund", { order: `O-${i}`, euros: 10 + i }))];

  it("journals every decision in one append", async () => {
    const journal = jsonJournal();
    await stopped(shop(script).loop.run({ runId: "b-1", journal, input: "refunds" }));
    const before = await readJournal(journal, "b-1");
    const pending = await listPendingApprovals(journal, { runId: "b-1" });
    expect(pending).toHaveLength(3);
    const recorded = await recordApprovals(
      journal,
      "b-1",
      pending.map((p) => ({ stepId: p.stepId, approved: true, by: "ana", inputDigest: p.inputDigest ?? undefined })),
    );
    expect(recorded.map((r) => r.approved)).toEqual([true, true, true]);
    const added = (await readJournal(journal, "b-1")).slice(before.length);
    expect(added.map((x) => x.type)).toEqual(["decision.recorded", "decision.recorded", "decision.recorded"]);
    expect(new Set(added.map((x) => x.meta.at)).size).toBe(1); // one append
    const { loop, ran } = shop(script);
    await loop.run({ runId: "b-1", journal });
    expect(ran).toHaveLength(3);
  });

  it("journals nothing when one answer is refused (all or nothing)", async () => {
    const journal = jsonJournal();
    await stopped(shop(script).loop.run({ runId: "b-2", journal, input: "refunds" }));
    const before = (await readJournal(journal, "b-2")).length;
    const pending = await listPendingApprovals(journal, { runId: "b-2" });
    const answers = pending.map((p, i) => ({
      stepId: p.stepId,
      approved: true,
      inputDigest: i === 2 ? "stale" : undefined,
    }));
    const e = await stopped(recordApprovals(journal, "b-2", answers));
    expect(isApprovalRefusedError(e) && e.code).toBe("approvalInputMismatch");
    const twice = await stopped(
      recordApprovals(journal, "b-2", [
        { stepId: step(0, 0), approved: true },
        { stepId: step(0, 0), approved: false },
      ]),
    );
    expect(isApprovalRefusedError(twice) && twice.code).toBe("approvalDecided");
    expect((await readJournal(journal, "b-2")).length).toBe(before);
  });
});

describe("answers given at the same instant", () => {
  it("N answers for one call record one decision, the others are told it was decided, and the tool runs once", async () => {
    const journal = jsonJournal();
    const script = [[call("r", "refund", { order: "A", euros: 10 })]];
    await stopped(shop(script).loop.run({ runId: "c-1", journal, input: "refund" }));
    const N = 8;
    const answers = await Promise.allSettled(
      Array.from({ length: N }, (_, i) =>
        recordApproval(journal, "c-1", step(0, 0), { approved: i % 2 === 0, by: `person-${i}` }),
      ),
    );
    const won = answers.filter((a) => a.status === "fulfilled");
    expect(won).toHaveLength(1);
    for (const lost of answers.filter((a): a is PromiseRejectedResult => a.status === "rejected")) {
      expect(isApprovalRefusedError(lost.reason) && lost.reason.code, String(lost.reason)).toBe("approvalDecided");
    }
    const decisions = (await readJournal(journal, "c-1")).filter(
      (x) => x.type === "decision.recorded" && x.data.decisionId === `${step(0, 0)}:approval`,
    );
    expect(decisions).toHaveLength(1);
    const approved = (won[0] as PromiseFulfilledResult<{ approved: boolean }>).value.approved;
    const { loop, ran } = shop(script);
    await Promise.allSettled(Array.from({ length: N }, () => loop.run({ runId: "c-1", journal })));
    await loop.run({ runId: "c-1", journal });
    expect(ran).toHaveLength(approved ? 1 : 0);
  });
});

describe("beside the codec and redaction", () => {
  it("keeps an edited input and a run-wide scope encrypted and redacted in the store, runs with the original, and resumes", async () => {
    const backend = memoryBackend();
    const journal = backend.journalOn(new Set<Feature>(["codec", "redaction"]));
    const asked = { order: "zq-asked-order", euros: 900, email: REDACTED.email };
    const edited = { order: "zq-edited-order", euros: 300, email: REDACTED.email };
    const script = [
      [call("1", "refund", asked)],
      [call("2", "refund", { order: "B", euros: 6 })],
      [call("3", "search", { q: "C" })],
    ];
    const policy: AgentLoopConfig["approvalPolicy"] = ({ toolName }) => (toolName === "search" ? "allow" : "ask");
    await stopped(shop(script, { approvalPolicy: policy }).loop.run({ runId: "x-1", journal, input: "refund" }));
    const first = shop(script, { approvalPolicy: policy });
    const reply = { approved: true, input: edited, scope: "run" as const, by: "ana" };
    const out = await first.loop.run({ runId: "x-1", journal, approvals: { [step(0, 0)]: reply } });
    expect(out.content).toBe("done");
    expect(first.ran.map((r) => r.stepId)).toEqual([step(0, 0), step(1, 0), step(2, 0)]);
    expect(first.ran[0]?.input).toEqual(edited); // the tool got the original, not the redacted value
    const raw = await backend.storedText();
    for (const secret of ["zq-edited-order", "zq-asked-order", REDACTED.email]) expect(raw).not.toContain(secret);
    // Read back through the codec: both digests, the scope, and the later calls approved by it and by the policy.
    expect(await decisionOf(journal, "x-1", step(0, 0))).toMatchObject({
      inputDigest: digestOfRecorded(asked).digest,
      approvedInputDigest: digestOfRecorded(edited).digest,
      scope: "run",
    });
    expect(await decisionOf(journal, "x-1", step(1, 0))).toMatchObject({ approved: true, by: "scope" });
    expect(await decisionOf(journal, "x-1", step(2, 0))).toMatchObject({ approved: true, by: "policy" });
    // A fresh process resumes the finished run from the journal: nothing runs again.
    const again = shop(script, { approvalPolicy: policy });
    expect((await again.loop.run({ runId: "x-1", journal })).content).toBe("done");
    expect(again.ran).toEqual([]);
  });

  it("resumes an edited call cut off mid-tool with the approved input, its frame's digest checked", async () => {
    const backend = memoryBackend();
    const journal = backend.journalOn(new Set<Feature>(["codec", "redaction"]));
    const edited = { order: "zq-edited-order", euros: 300, email: REDACTED.email };
    const script = [[call("1", "refund", { order: "A", euros: 900 })]];
    await stopped(shop(script).loop.run({ runId: "x-2", journal, input: "refund" }));
    // The tool throws the first time only, as a process would die in it: the frame is left started.
    const crashing = shop(script);
    const controller = new AbortController();
    const refund = crashing.refund as { execute: Tool["execute"] };
    const execute = refund.execute;
    refund.execute = (input, context) => {
      controller.abort();
      return new Promise(() => execute(input, context));
    };
    await crashing.loop
      .run({
        runId: "x-2",
        journal,
        signal: controller.signal,
        approvals: { [step(0, 0)]: { approved: true, input: edited } },
      })
      .catch(() => undefined);
    const resumed = shop(script);
    expect((await resumed.loop.run({ runId: "x-2", journal })).content).toBe("done");
    expect(resumed.ran.map((r) => r.input)).toEqual([edited]);
  });
});

describe("a session-wide approval", () => {
  /** A chat loop that refunds on every user message, then answers. */
  function chat(ran: string[]) {
    const refund: Tool<Refund> = {
      description: "refunds an order",
      requiresApproval: true,
      execute: (input, { runId }) => {
        ran.push(`${runId}:${input.order}`);
        return { refunded: input.euros };
      },
    };
    const model = scriptedModel(({ messages }) =>
      messages.at(-1)?.role === "user"
        ? {
            toolCalls: [
              { id: `r${messages.length}`, name: "refund", input: { order: `O${messages.length}`, euros: 5 } },
            ],
          }
        : { content: "refunded" },
    );
    return agentLoop$({ id: "chat", model, tools: { refund } });
  }

  it("approves the tool in the session's later messages, each decision naming the run that gave the scope", async () => {
    const journal = jsonJournal();
    const ran: string[] = [];
    const loop = chat(ran);
    await stopped(loop.send({ sessionId: "s", journal, message: "refund one" }));
    const [pending] = await listPendingApprovals(journal, { runId: "s/0" });
    await recordApproval(journal, "s/0", pending?.stepId ?? "", { approved: true, scope: "session", by: "ana" });
    await loop.run({ runId: "s/0", journal });
    const reply = await loop.send({ sessionId: "s", journal, message: "refund another" });
    expect(reply.content).toBe("refunded");
    expect(ran).toHaveLength(2);
    expect(await decisionOf(journal, "s/1", "chat#turn:0:tool:0")).toMatchObject({
      approved: true,
      by: "scope",
      scopedIn: "s/0",
      scopedBy: `${pending?.stepId}:approval`,
    });
    // Another session asks again.
    await stopped(loop.send({ sessionId: "t", journal, message: "refund one" }));
  });

  it("is not taken from a scope given for the run only", async () => {
    const journal = jsonJournal();
    const loop = chat([]);
    await stopped(loop.send({ sessionId: "u", journal, message: "refund one" }));
    const [pending] = await listPendingApprovals(journal, { runId: "u/0" });
    await loop.run({ runId: "u/0", journal, approvals: { [pending?.stepId ?? ""]: { approved: true, scope: "run" } } });
    await stopped(loop.send({ sessionId: "u", journal, message: "refund another" }));
  });
});

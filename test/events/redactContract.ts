import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { digestOf } from "../../src/core/digest.ts";
import { payloadCodec, staticKeys } from "../../src/events/codec/codec.ts";
import { withCodec } from "../../src/events/codec/codecStore.ts";
import { compact } from "../../src/events/compact.ts";
import { readJournal } from "../../src/events/journal.ts";
import { readArchived } from "../../src/events/readArchived.ts";
import {
  isRedactionError,
  type RedactionError,
  redactedFields,
  redaction,
  verifyRedacted,
  withRedaction,
} from "../../src/events/redaction/redact.ts";
import { isRedactedOriginalsError, type RedactedOriginalsError } from "../../src/events/redaction/redactedOriginals.ts";
import { forgetRedactedOriginals } from "../../src/events/redaction/redactedResume.ts";
import type { ArchivedFrame, Journal } from "../../src/events/spi.ts";
import type { JournalEntry } from "../../src/events/types.ts";
import { scriptedModel } from "../../src/models/scripted.ts";
import { showStep } from "../../src/read/step.ts";
import {
  isAgentInterruptedError,
  isRedactedHistoryError,
  RedactedHistoryError,
} from "../../src/runtime/base/errors.ts";
import { rebuildToolCallLog, resolveStep } from "../../src/runtime/base/readers.ts";
import { agentLoop$ } from "../../src/runtime/run/agentLoop.ts";
import { logsOf } from "../support/loop.ts";

/** What an adapter's test file gives the redaction contract: two fresh journals (one redacted run, one plain) and cleanup. */
export interface RedactFixture {
  readonly journal: Journal & { close(): Promise<void> };
  readonly cleanup?: () => Promise<void>;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("expected the promise to reject");
}

/** A customer record, as a CRM lookup tool returns it (the PII an operator must not keep). */
const customer = (id: number) => ({
  id,
  name: `Customer ${id}`,
  email: `c${id}@example.com`,
  cards: [
    { last4: "4242", number: `4242 4242 4242 ${4000 + id}` },
    { last4: "1881", number: `5555 5555 5555 ${1000 + id}` },
  ],
  notes: "prefers email",
});

const tools = {
  lookup: {
    description: "finds a customer by id",
    execute: (input: unknown) => customer((input as { id: number }).id),
  },
};

/** Two lookups, then an answer that quotes the email (so run.completed holds it too). */
const model = () =>
  scriptedModel([
    { content: "looking", toolCalls: [{ id: "a", name: "lookup", input: { id: 1 } }] },
    { toolCalls: [{ id: "b", name: "lookup", input: { id: 2 } }] },
    { content: "Customer 1 is c1@example.com", toolCalls: [] },
  ]);

const loop = (mode: "full" | "lean", maxIterations?: number) =>
  agentLoop$({
    id: "crm",
    model: model(),
    tools,
    toolCallLog: mode,
    ...(maxIterations === undefined ? {} : { maxIterations }),
  });

/** Paths for the fields a record names, and a function for addresses quoted in text (the model's answer). */
const rules = () =>
  redaction({
    paths: ["$..email", "$.cards[*].number"],
    redact: (value) => JSON.parse(JSON.stringify(value).replace(/c\d@example\.com/g, "[email]")),
  });

const SECRETS = ["c1@example.com", "c2@example.com", "4242 4242 4242 4001", "5555 5555 5555 1002"];

/** A codec that compresses and encrypts, under a fresh key. */
const encrypting = () =>
  payloadCodec({
    compress: "gzip",
    minBytes: 1,
    encrypt: { keys: staticKeys({ current: "k1", keys: { k1: randomBytes(32) } }) },
  });

/** The prompt digest each model call recorded, in order. */
const promptDigests = (entries: readonly JournalEntry[]) =>
  entries.flatMap((e) => (e.type === "frame.started" && e.data.frameId.endsWith(":model") ? [e.data.inputDigest] : []));

const toolOutputs = (entries: readonly JournalEntry[]) =>
  entries.filter((e) => e.type === "frame.completed" && (e.data as { frameId: string }).frameId.includes(":tool:"));

/**
 * Redaction on a store: what is stored is redacted and records the original's digest and paths,
 * an auditor's original verifies, the lean log is the same as without redaction, `loom show`'s
 * reader still verifies what can be, redaction goes before the codec, and a redacted run is not
 * resumed. Adapter-neutral: it uses the Journal SPI only.
 */
export function redactContract(name: string, open: () => Promise<RedactFixture>): void {
  describe(`redaction: ${name}`, () => {
    let fixture: RedactFixture;
    let plain: Journal;
    beforeEach(async () => {
      fixture = await open();
      plain = fixture.journal;
    });
    afterEach(async () => {
      await fixture.journal.close();
      await fixture.cleanup?.();
    });

    it.each(["full", "lean"] as const)(
      "%s: stores the run redacted, with the original's digest and paths, and the lean log as without redaction",
      async (mode) => {
        const journal = withRedaction(plain, rules());
        const live = await loop(mode).run({ runId: "red", input: "who is customer 1?", journal });
        const reference = await loop(mode).run({ runId: "ref", input: "who is customer 1?", journal: plain });
        // Live, the model saw the originals and the caller gets its answer; the log is the journal's (redacted).
        expect(live.content).toBe(reference.content);
        expect(live.iterations).toBe(reference.iterations);
        expect(JSON.stringify(live.toolCallLog)).toBe(JSON.stringify(await rebuildToolCallLog(journal, "red", mode)));
        for (const secret of SECRETS) expect(JSON.stringify(live.toolCallLog), secret).not.toContain(secret);

        const stored = JSON.stringify(await plain.store.read("red"));
        for (const secret of SECRETS) expect(stored, secret).not.toContain(secret);
        expect(stored).toContain("[redacted]");
        expect(JSON.stringify(await plain.store.read("ref"))).toContain("c2@example.com");

        // The lean log (digests over the ORIGINAL, ADR 0142 D2) is the unredacted run's.
        const red = await logsOf(journal, "red");
        const ref = await logsOf(plain, "ref");
        expect(red.lean).toBe(ref.lean);
        expect(red.full).not.toBe(ref.full); // the full log shows what is stored: redacted
        expect(red.full).toContain("[redacted]");

        const entries = await readJournal(plain, "red");
        const [first, second] = toolOutputs(entries);
        expect(redactedFields(first?.data)).toEqual([
          {
            field: "output",
            ...digestOf(customer(1)),
            paths: ["$['cards'][0]['number']", "$['cards'][1]['number']", "$['email']"],
            fn: false,
          },
        ]);
        expect(((first as JournalEntry).data as { digest: string }).digest).toBe(digestOf(customer(1)).digest);
        // The auditor holding the original verifies it; another original does not.
        expect(verifyRedacted(customer(1), first as JournalEntry)).toMatchObject({ ok: true, reproduced: true });
        const wrong = verifyRedacted({ ...customer(2), id: 1 }, first as JournalEntry);
        expect(wrong.ok).toBe(false);
        expect(wrong.reason).toMatch(/hashes to/);
        expect(verifyRedacted(customer(2), second as JournalEntry).ok).toBe(true);
        // The answer quoted the email: the function redacted it in the model's response and the run's value.
        const completed = entries.find((e) => e.type === "run.completed") as JournalEntry;
        expect(redactedFields(completed.data)).toMatchObject([{ field: "output", paths: [], fn: true }]);
        expect((completed.data as { output: { content: string } }).output.content).toBe("Customer 1 is [email]");
        expect(verifyRedacted({ content: live.content, iterations: live.iterations }, completed).ok).toBe(true);
        const answer = entries.filter((e) => e.type === "frame.completed").at(-1) as JournalEntry;
        expect(redactedFields(answer.data)).toMatchObject([{ field: "output", fn: true }]);
      },
    );

    it.each(["full", "lean"] as const)(
      "%s: the log the run returns is the log rebuilt from the journal, a redacted tool input included",
      async (mode) => {
        const journal = withRedaction(plain, rules());
        const asks = agentLoop$({
          id: "crm",
          model: scriptedModel([
            { toolCalls: [{ id: "a", name: "lookup", input: { id: 1, email: "c1@example.com" } }] },
            { content: "done", toolCalls: [] },
          ]),
          tools,
          toolCallLog: mode,
        });
        const live = await asks.run({ runId: "in", input: "go", journal });
        const rebuilt = await rebuildToolCallLog(journal, "in", mode);
        expect(JSON.stringify(live.toolCallLog)).toBe(JSON.stringify(rebuilt));
        expect(live.toolCallLog[0]?.toolInput).toEqual({ id: 1, email: "[redacted]" });
      },
    );

    it("the run's journaled events (onEvent, what loop.stream and spans read) carry the redacted form, as a follower of the journal reads it", async () => {
      const codec = encrypting();
      const journal = withRedaction(withCodec(plain, codec), rules(), { keepOriginals: { codec } });
      const events: unknown[] = [];
      await loop("full").run({ runId: "ev", input: "go", journal, onEvent: (e) => events.push(e) });
      // The journaled events (those with a cursor); a model's live deltas are its text as it streams, never journaled.
      const seen = JSON.stringify(events.filter((e) => typeof e === "object" && e !== null && "cursor" in e));
      expect(seen).toContain("[redacted]");
      for (const secret of SECRETS) expect(seen, secret).not.toContain(secret);
    });

    it("resolveStep and showStep: the original's digest (the lean entry's), the redacted output, nothing claimed to verify it by hash", async () => {
      const journal = withRedaction(plain, rules());
      const out = await loop("lean").run({ runId: "show", input: "go", journal });
      const lean = out.toolCallLog[0] as { stepId: string; digest: string };
      const step = await resolveStep(journal, lean.stepId, { runId: "show" });
      expect(step.digest).toBe(lean.digest);
      expect((step.output as { email: string }).email).toBe("[redacted]");
      expect(step.redacted?.paths).toContain("$['email']");
      const shown = await showStep(journal, lean.stepId, "show");
      // The prompt digest of the next call covered the original: it cannot vouch for the redacted text.
      expect(shown.verified).toEqual([]);
      expect(shown.redacted?.digest).toBe(lean.digest);
    });

    it("claim-check: the blob holds the redacted output, the frame records the original's digest; show reads and hash-checks the blob", async () => {
      const journal = withRedaction(plain, rules());
      const blobs = journal.blobs as NonNullable<Journal["blobs"]>;
      const claimed = agentLoop$({
        id: "crm",
        model: model(),
        tools,
        toolCallLog: "lean",
        claimCheck: { blobs, thresholdBytes: 50 },
      });
      const out = await claimed.run({ runId: "cc", input: "go", journal });
      const [first] = toolOutputs(await readJournal(plain, "cc"));
      const data = first?.data as { claimChecked?: true; output: { ref: string } };
      expect(data.claimChecked).toBe(true);
      const [record] = redactedFields(data);
      expect(record).toMatchObject({ field: "output", ...digestOf(customer(1)), blob: data.output.ref });
      const blob = Buffer.from(await (plain.blobs as NonNullable<Journal["blobs"]>).get(data.output.ref)).toString();
      for (const secret of SECRETS) expect(blob, secret).not.toContain(secret);

      const lean = out.toolCallLog[0] as { stepId: string; digest: string };
      const step = await resolveStep(journal, lean.stepId, { runId: "cc" });
      expect(step.digest).toBe(lean.digest); // D2: over the envelope, which names the redacted blob
      expect((step.output as { email: string }).email).toBe("[redacted]");
      const shown = await showStep(journal, lean.stepId, "cc");
      expect(shown.verified).toContain("the blob's sha256 in its claim-check envelope");
      expect(shown.verified).toContain("the digest its frame recorded"); // over the envelope, stored as is
      expect(verifyRedacted(customer(1), first as JournalEntry, { stored: step.output })).toMatchObject({
        ok: true,
        reproduced: true,
      });
    });

    it("compaction keeps the original's digest in its marker: the lean log is unchanged, the archived frame verifies", async () => {
      const journal = withRedaction(plain, rules());
      const out = await loop("lean").run({ runId: "cmp", input: "go", journal });
      const before = await logsOf(journal, "cmp");
      const result = await compact(journal, "cmp", { keepTurns: 1 });
      expect(result.frameIds).toEqual(["crm#turn:0:tool:0", "crm#turn:1:tool:0"]);
      expect((await logsOf(journal, "cmp")).lean).toBe(before.lean);
      expect(JSON.stringify(out.toolCallLog)).toBe(before.lean);
      const frame = await readArchived(journal, "crm#turn:0:tool:0", { runId: "cmp" });
      expect(((frame as ArchivedFrame).completed.data.output as { email: string }).email).toBe("[redacted]");
      expect(verifyRedacted(customer(1), frame?.completed as JournalEntry).ok).toBe(true);
      const step = await resolveStep(journal, "crm#turn:0:tool:0", { runId: "cmp" });
      expect(step.source).toBe("archive");
    });

    it("a function redacts too (recorded as fn: true), verified by the digest alone; one that throws writes nothing", async () => {
      const fn = redaction({
        redact: (value, at) => (at.field === "input" && typeof value === "string" ? "[prompt withheld]" : value),
      });
      const journal = withRedaction(plain, fn);
      await loop("full").run({ runId: "fn", input: "who is c1@example.com?", journal });
      const [started] = await readJournal(plain, "fn");
      expect(((started as JournalEntry).data as { input: unknown }).input).toBe("[prompt withheld]");
      expect(redactedFields(started?.data)).toEqual([
        { field: "input", ...digestOf("who is c1@example.com?"), paths: [], fn: true },
      ]);
      expect(verifyRedacted("who is c1@example.com?", started as JournalEntry)).toMatchObject({
        ok: true,
        reproduced: undefined,
      });

      const throwing = withRedaction(
        plain,
        redaction({
          redact: () => {
            throw new Error("classifier down");
          },
        }),
      );
      const e = (await rejection(
        loop("full").run({ runId: "boom", input: "hi", journal: throwing }),
      )) as RedactionError;
      expect(isRedactionError(e) && e.code).toBe("redactionFailed");
      expect(e.message).toMatch(/run boom: the redaction function threw on run.started input: classifier down/);
      expect(await plain.store.read("boom")).toEqual([]);
    });

    it("redacts before the codec encodes; placed under the codec it refuses (redactAfterEncode)", async () => {
      const codec = payloadCodec({
        compress: "gzip",
        minBytes: 1,
        encrypt: { keys: staticKeys({ current: "k1", keys: { k1: randomBytes(32) } }) },
      });
      const journal = withRedaction(withCodec(plain, codec), rules());
      await loop("lean").run({ runId: "both", input: "go", journal });
      const raw = JSON.stringify(await plain.store.read("both"));
      expect(raw).toContain('"__loomCodec":1');
      expect(raw).toContain('"redacted":['); // the record stays in the clear: an auditor reads it without the key
      const decoded = JSON.stringify(await readJournal(journal, "both"));
      for (const secret of SECRETS) expect(decoded, secret).not.toContain(secret);
      const [first] = toolOutputs(await readJournal(journal, "both"));
      expect(verifyRedacted(customer(1), first as JournalEntry).ok).toBe(true);

      const wrongOrder = withCodec(withRedaction(plain, rules()), codec);
      const e = (await rejection(
        loop("lean").run({ runId: "order", input: "go", journal: wrongOrder }),
      )) as RedactionError;
      expect([isRedactionError(e), e.code]).toEqual([true, "redactAfterEncode"]);
      expect(await plain.store.read("order")).toEqual([]);
    });

    it.each(["full", "lean"] as const)(
      "%s: keepOriginals: a stopped redacted run resumes and the model is fed the originals; readers see the redacted form",
      async (mode) => {
        const codec = encrypting();
        const journal = withRedaction(withCodec(plain, codec), rules(), { keepOriginals: { codec } });
        expect(isAgentInterruptedError(await rejection(loop(mode, 1).run({ runId: "k", input: "go", journal })))).toBe(
          true,
        );
        const stopped = JSON.stringify(await plain.store.read("k"));
        for (const secret of SECRETS) expect(stopped, secret).not.toContain(secret);
        expect(stopped).toContain('"originals":{"key":"k"');
        // The run's key is kept wrapped by the codec, not in the clear.
        expect(JSON.parse((await plain.dataKeys?.get("k")) as string)).toMatchObject({ __loomCodec: 1 });

        const out = await loop(mode).run({ runId: "k", journal });
        const reference = await loop(mode).run({ runId: "ref", input: "go", journal: plain });
        expect(out.content).toBe(reference.content);
        // Each model call's prompt digest is the unredacted run's: the resume fed the model the originals.
        expect(promptDigests(await readJournal(journal, "k"))).toEqual(promptDigests(await readJournal(plain, "ref")));
        // Readers, and the log the run returns, see the redacted form.
        const rebuilt = await rebuildToolCallLog(journal, "k", mode);
        expect(JSON.stringify(out.toolCallLog)).toBe(JSON.stringify(rebuilt));
        const seen = JSON.stringify([rebuilt, await readJournal(journal, "k"), out.toolCallLog]);
        for (const secret of SECRETS) expect(seen, secret).not.toContain(secret);
        expect((await logsOf(journal, "k")).lean).toBe((await logsOf(plain, "ref")).lean);
      },
    );

    it("keepOriginals: a stopped redacted run compacted into the archive still resumes with the originals", async () => {
      const codec = encrypting();
      const journal = withRedaction(withCodec(plain, codec), rules(), { keepOriginals: { codec } });
      await rejection(loop("full", 2).run({ runId: "ca", input: "go", journal }));
      const compacted = await compact(journal, "ca", { keepTurns: 0 });
      expect(compacted.frameIds).toEqual(["crm#turn:0:tool:0", "crm#turn:1:tool:0"]);
      const out = await loop("full").run({ runId: "ca", journal });
      const reference = await loop("full").run({ runId: "ref", input: "go", journal: plain });
      expect(out.content).toBe(reference.content);
      expect(promptDigests(await readJournal(journal, "ca"))).toEqual(promptDigests(await readJournal(plain, "ref")));
      const seen = JSON.stringify([out.toolCallLog, await rebuildToolCallLog(journal, "ca", "full")]);
      for (const secret of SECRETS) expect(seen, secret).not.toContain(secret);
    });

    it("a redacted run with no original kept stays unresumable once compaction moved its redacted frames to the archive", async () => {
      const journal = withRedaction(plain, redaction({ paths: ["$..email"] }));
      await rejection(loop("lean", 2).run({ runId: "cn", input: "go", journal }));
      expect((await compact(journal, "cn", { keepTurns: 0 })).frameIds).toEqual([
        "crm#turn:0:tool:0",
        "crm#turn:1:tool:0",
      ]);
      const before = (await plain.store.read("cn")).length;
      const e = await rejection(loop("lean").run({ runId: "cn", journal }));
      expect(isRedactedHistoryError(e)).toBe(true);
      expect((await plain.store.read("cn")).length).toBe(before);
    });

    it("forgetRedactedOriginals: the originals can no longer be opened; the resume is refused (forgotten), nothing appended", async () => {
      const codec = encrypting();
      const journal = withRedaction(withCodec(plain, codec), rules(), { keepOriginals: { codec } });
      await rejection(loop("lean", 1).run({ runId: "f", input: "go", journal }));
      expect(await forgetRedactedOriginals(journal, "f")).toEqual(["f"]);
      expect(await plain.dataKeys?.get("f")).toBeUndefined();
      const before = (await plain.store.read("f")).length;
      const e = (await rejection(loop("lean").run({ runId: "f", journal }))) as RedactedHistoryError;
      expect([isRedactedHistoryError(e), e.why]).toEqual([true, "forgotten"]);
      expect(e.message).toMatch(
        /run f cannot be resumed: its journal was redacted \(first at seq \d+.*their key was forgotten/,
      );
      expect((await plain.store.read("f")).length).toBe(before);
      expect(await forgetRedactedOriginals(journal, "f")).toEqual([]);
    });

    it("keepOriginals needs a codec that encrypts (RedactedOriginalsError)", () => {
      const e = (() => {
        try {
          withRedaction(plain, rules(), { keepOriginals: { codec: payloadCodec({ compress: "gzip" }) } });
        } catch (err) {
          return err;
        }
      })() as RedactedOriginalsError;
      expect([isRedactedOriginalsError(e), e.code]).toEqual([true, "originalsNeedEncryption"]);
    });

    it("refuses to resume a redacted run (RedactedHistoryError, nothing appended); a completed one is served as recorded", async () => {
      const journal = withRedaction(plain, rules());
      const first = await rejection(loop("lean", 1).run({ runId: "stop", input: "go", journal }));
      expect(isAgentInterruptedError(first)).toBe(true);
      const before = (await plain.store.read("stop")).length;
      const e = (await rejection(loop("lean").run({ runId: "stop", journal }))) as RedactedHistoryError;
      expect(isRedactedHistoryError(e)).toBe(true);
      expect(e).toBeInstanceOf(RedactedHistoryError);
      expect(e.code).toBe("redactedHistory");
      expect(e.message).toMatch(/run stop cannot be resumed: its journal was redacted \(first at seq \d+/);
      expect(e.why).toBe("notKept");
      expect((await plain.store.read("stop")).length).toBe(before);
      // Also through a journal opened without the redaction (the record is in the entries).
      expect(isRedactedHistoryError(await rejection(loop("lean").run({ runId: "stop", journal: plain })))).toBe(true);

      const done = await loop("lean").run({ runId: "done", input: "go", journal });
      const again = await loop("lean").run({ runId: "done", journal });
      expect(done.content).toBe("Customer 1 is c1@example.com"); // live: the original
      expect(again.content).toBe("Customer 1 is [email]"); // served from the journal: as stored
      expect(JSON.stringify(again.toolCallLog)).toBe(JSON.stringify(done.toolCallLog));
    });
  });
}

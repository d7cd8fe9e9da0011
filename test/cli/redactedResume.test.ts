import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { agentLoop$, type OpenJournal, openSqliteJournal, scriptedModel } from "../../src/index.ts";
import {
  forgetRedactedOriginals,
  isRedactedHistoryError,
  payloadCodec,
  redaction,
  staticKeys,
  withCodec,
  withRedaction,
} from "../../src/journal.ts";
import { startViewer } from "../../src/viewer/server.ts";
import { loom, tempDir } from "./support.ts";

/**
 * A run stopped by its budget on a gzip+AES journal with `$..ssn` redacted: the CLI and the viewer
 * advise "raise the budget and resume" only where the resume would work (the originals are kept
 * and their key is not forgotten), and say why it cannot be resumed otherwise.
 */

const dir = tempDir("loom-cli-redacted-resume-");
const db = join(dir, "loom.db");
const k1 = randomBytes(32);
const codec = payloadCodec({
  compress: "gzip",
  minBytes: 1,
  encrypt: { keys: staticKeys({ current: "k1", keys: { k1 } }) },
});
const SSN = "123-45-6789";
const RESUME = "Raise the budget and resume the run";

const loop = () =>
  agentLoop$({
    id: "crm",
    model: scriptedModel(({ turn }) =>
      turn < 2
        ? {
            toolCalls: [{ id: `c${turn}`, name: "lookup", input: { id: turn } }],
            usage: { inputTokens: 100, outputTokens: 7 },
          }
        : { content: "done", toolCalls: [], usage: { inputTokens: 100, outputTokens: 7 } },
    ),
    tools: { lookup: { description: "a customer", execute: () => ({ name: "Ada", ssn: SSN }) } },
  });

/** The journal as the program that runs the loop opens it: redacted over the codec, keeping originals or not. */
const journalOf = (file: OpenJournal, keep: boolean) =>
  withRedaction(withCodec(file, codec), redaction({ paths: ["$..ssn"] }), keep ? { keepOriginals: { codec } } : {});

async function withFile<T>(use: (file: OpenJournal) => Promise<T>): Promise<T> {
  const file = openSqliteJournal(db);
  try {
    return await use(file);
  } finally {
    await file.close();
  }
}

let keys: string;

beforeAll(async () => {
  keys = join(dir, "keys.json");
  writeFileSync(keys, JSON.stringify({ k1: k1.toString("base64") }));
  await withFile(async (file) => {
    for (const [runId, keep] of [
      ["none-1", false],
      ["kept-1", true],
      ["gone-1", true],
    ] as const) {
      await loop()
        .run({ runId, input: "who?", journal: journalOf(file, keep), budget: { inputTokens: 200 } })
        .catch(() => {});
    }
    expect(await forgetRedactedOriginals(journalOf(file, true), "gone-1")).toEqual(["gone-1"]);
  });
});

describe("advice to resume a redacted run, where it would be refused", () => {
  it("loom show advises the resume only where the originals are kept", async () => {
    const show = (runId: string) => loom(dir, ["show", runId, "--db", db, "--codec-keys", keys]);
    const none = await show("none-1");
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).not.toContain(RESUME);
    expect(none.stdout).toMatch(
      /cannot be resumed: redacted at seq \d+ with no original kept; start a new run, or fork it/,
    );
    expect(none.stdout).not.toContain(SSN);
    const gone = await show("gone-1");
    expect(gone.stdout).not.toContain(RESUME);
    expect(gone.stdout).toContain("with its originals' key forgotten");
    const kept = await show("kept-1");
    expect(kept.stdout).toContain(RESUME);
    expect(kept.stdout).not.toContain("cannot be resumed");
    expect(kept.stdout).not.toContain(SSN);
  });

  it("loom runs says which runs cannot be resumed", async () => {
    const runs = await loom(dir, ["runs", "--db", db, "--codec-keys", keys, "--json"]);
    expect(runs.code, runs.stderr).toBe(0);
    const rows = new Map(
      (JSON.parse(runs.stdout) as { runId: string; unresumable?: string }[]).map((r) => [r.runId, r]),
    );
    expect(rows.get("none-1")?.unresumable).toMatch(/no original kept/);
    expect(rows.get("gone-1")?.unresumable).toMatch(/key forgotten/);
    expect(rows.get("kept-1")?.unresumable).toBeUndefined();
    const text = (await loom(dir, ["runs", "--db", db, "--codec-keys", keys])).stdout.split("\n");
    const line = (runId: string) => text.find((l) => l.startsWith(runId)) ?? "";
    expect(line("none-1")).toContain("cost 0; cannot");
    expect(line("gone-1")).toContain("cost 0; cannot");
    expect(line("kept-1")).toContain("cost 0. Raise");
  });

  it("the viewer's run page says the same", async () => {
    const journal = withCodec(openSqliteJournal(db, { readonly: true }), codec);
    const viewer = await startViewer({ journal });
    try {
      const none = await (await fetch(`${viewer.url}/runs/none-1`)).text();
      expect(none).not.toContain(RESUME);
      expect(none).toContain("cannot be resumed");
      const kept = await (await fetch(`${viewer.url}/runs/kept-1`)).text();
      expect(kept).toContain(RESUME);
    } finally {
      await viewer.stop();
      await journal.close();
    }
  });

  it("as advised: the kept run resumes with a raised budget; the others are refused", async () => {
    await withFile(async (file) => {
      const out = await loop().run({ runId: "kept-1", journal: journalOf(file, true), budget: { inputTokens: 1000 } });
      expect(out.content).toBe("done");
      for (const runId of ["none-1", "gone-1"]) {
        const e = await loop()
          .run({ runId, journal: journalOf(file, true), budget: { inputTokens: 1000 } })
          .catch((err: unknown) => err);
        expect(isRedactedHistoryError(e), runId).toBe(true);
      }
      expect(JSON.stringify(await file.store.read("kept-1"))).not.toContain(SSN);
    });
  });
});

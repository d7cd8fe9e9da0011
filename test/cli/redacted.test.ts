import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { agentLoop$, openSqliteJournal, scriptedModel } from "../../src/index.ts";
import { redaction, withRedaction } from "../../src/journal.ts";
import { showStep } from "../../src/read/step.ts";
import { stepPage } from "../../src/viewer/stepPage.ts";
import { loom, tempDir } from "./support.ts";

/** `loom show` of a redacted step: the stored (redacted) output, the original's digest, and no hash check claimed. */
describe("loom show on a redacted journal", () => {
  const dir = tempDir("loom-cli-redacted-");
  const db = join(dir, "loom.db");
  let digest: string;

  beforeAll(async () => {
    const file = openSqliteJournal(db);
    try {
      const loop = agentLoop$({
        id: "crm",
        toolCallLog: "lean",
        model: scriptedModel([
          { toolCalls: [{ id: "a", name: "lookup", input: { id: 1 } }] },
          { content: "found", toolCalls: [] },
        ]),
        tools: { lookup: { description: "a customer", execute: () => ({ id: 1, email: "c1@example.com" }) } },
      });
      const out = await loop.run({
        runId: "r1",
        input: "who?",
        journal: withRedaction(file, redaction({ paths: ["$..email"] })),
      });
      digest = (out.toolCallLog[0] as { digest: string }).digest;
    } finally {
      await file.close();
    }
  });

  it("prints the redacted output with the original's digest, and says it is not hash-verified", async () => {
    const r = await loom(dir, ["show", "crm#turn:0:tool:0", "--run", "r1", "--db", db]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`digest  ${digest}`);
    expect(r.stdout).toContain("redacted $['email']: the digest above is the original's");
    expect(r.stdout).toContain("not verified: the output is redacted, and the digests cover the original");
    expect(r.stdout).toContain('"email": "[redacted]"');
    expect(r.stdout).not.toContain("c1@example.com");
    const story = await loom(dir, ["show", "r1", "--db", db]);
    expect(story.code, story.stderr).toBe(0);
  });

  it("the viewer's step page says the same", async () => {
    const file = openSqliteJournal(db, { readonly: true });
    try {
      const page = stepPage(await showStep(file, "crm#turn:0:tool:0", "r1"));
      expect(page).toContain("not verified: the output is redacted, and the digests cover the original");
      expect(page).toMatch(
        /<dt>redacted<\/dt><dd class="redacted">\$\[(&#39;|')email(&#39;|')\]: the digest above is the original's/,
      );
      expect(page).not.toContain("c1@example.com");
    } finally {
      await file.close();
    }
  });
});

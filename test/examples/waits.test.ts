import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { order } from "../../examples/order.ts";
import { reminder } from "../../examples/reminder.ts";
import { openSqliteJournal, readJournal } from "../../src/index.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-waits-examples-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("examples/reminder.ts", () => {
  it("sleeps 3 days holding no process: not woken a day later, woken and reminding at 3 days", async () => {
    const start = Date.parse("2026-05-01T08:00:00.000Z");
    const lines: unknown[][] = [];
    const { runId, tomorrow, due, sent } = await reminder(join(dir, "reminder.db"), (...a) => lines.push(a), start);
    expect(lines[0]).toEqual(["waiting:", "check order 42 again until 2026-05-04T08:00:00.000Z"]);
    expect(tomorrow.map((w) => w.outcome)).toEqual(["not-due"]);
    expect(due).toEqual([expect.objectContaining({ runId, outcome: "completed" })]);
    expect(sent).toEqual(["Order 42: has it shipped?"]);
  });
});

describe("examples/order.ts", () => {
  it("waits for the payment webhook, delivered by an HTTP POST on loopback; a replay is refused", async () => {
    const file = join(dir, "order.db");
    const { runId, statuses, output } = await order(file, () => {});
    expect(statuses).toEqual([200, 409]);
    expect(output.content).toBe("Order 42 is paid; it ships today.");
    expect(output.toolCallLog[0]?.toolOutput).toEqual({ paid: 4200, currency: "EUR" });
    const journal = openSqliteJournal(file);
    try {
      const text = JSON.stringify(await readJournal(journal, runId));
      expect(text).toContain('"tokenDigest"');
      expect(text).not.toContain("lw1."); // the token itself is never journaled
    } finally {
      await journal.close();
    }
  });
});

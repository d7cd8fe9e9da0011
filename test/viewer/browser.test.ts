import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cancelRun,
  forkRun,
  isAgentInterruptedError,
  type OpenJournal,
  openSqliteJournal,
  readJournal,
  rebuildToolCallLog,
  recordApproval,
} from "../../src/index.ts";
import type { ViewerActions } from "../../src/viewer/actions.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { tempDir } from "../cli/support.ts";
import { supportLoop, viewerJournal } from "./support.ts";

/**
 * The viewer in a real browser: Debian's chromium, headless, driven by playwright-core (never a
 * downloaded browser). `.ci/run` installs it; elsewhere these tests skip, saying why, when no
 * chromium binary is found. LOOM_SCREENSHOTS=docs/images saves the README's screenshots.
 */
const CHROMIUM = [process.env.LOOM_CHROMIUM, "/usr/bin/chromium", "/usr/bin/chromium-browser"].find(
  (p): p is string => p !== undefined && p !== "" && existsSync(p),
);
const SKIPPED = CHROMIUM ? "" : " (skipped: no chromium binary; apt-get install chromium, or set LOOM_CHROMIUM)";

/** How long a page may take to change (the machine may be busy with other test files). */
const WAIT = 15_000;

const dir = tempDir("loom-viewer-browser-");
const shots = process.env.LOOM_SCREENSHOTS ? resolve(process.env.LOOM_SCREENSHOTS) : join(dir, "shots");

describe.skipIf(!CHROMIUM)(`the viewer in headless Chromium${SKIPPED}`, () => {
  let browser: Browser;
  let journal: OpenJournal;
  let viewer: Viewer;
  let page: Page;

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    journal = openSqliteJournal(await viewerJournal(dir));
    viewer = await startViewer({ journal, actions: approvingActions() });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });
  afterAll(async () => {
    await browser?.close();
    await viewer?.stop();
    await journal?.close();
  });

  const shot = (name: string) => page.screenshot({ path: join(shots, `viewer-${name}.png`), fullPage: false });

  it("opens the runs page: the run waiting for an approval first", async () => {
    await page.goto(viewer.url);
    const rows = page.locator("table.runs tbody tr");
    await expect.poll(() => rows.count(), { timeout: WAIT }).toBe(3);
    expect(await rows.first().getAttribute("data-run")).toBe("wait-1");
    expect(await rows.first().locator(".status").textContent()).toBe("waiting for approval");
    await shot("runs");
  });

  it("opens a run: its timeline of model and tool calls", async () => {
    await page.goto(viewer.url);
    await page.click('a[href="/runs/sink-1"]');
    await page.waitForSelector("table.timeline");
    expect(await page.locator("tr.model").count()).toBe(6);
    expect(await page.locator("tr.call").count()).toBe(15);
    expect(await page.locator('tr[data-step="sink#turn:0:tool:2"] td').nth(6).textContent()).toContain("unknown-tool");
    await shot("run");
  });

  it("moves the time-travel slider and sees both logs and the statechart state change", async () => {
    await page.goto(`${viewer.url}/runs/sink-1/travel?at=6`);
    const lean = page.locator("section.log.lean .count");
    const full = page.locator("section.log.full .count");
    const before = await lean.getAttribute("data-count");
    const chartBefore = await page.locator("svg.chart .current").getAttribute("data-state");
    await page.locator("input#at").fill("30");
    await expect.poll(() => lean.getAttribute("data-count"), { timeout: WAIT }).not.toBe(before);
    expect(await full.getAttribute("data-count")).toBe(await lean.getAttribute("data-count"));
    expect(Number(await lean.getAttribute("data-count"))).toBeGreaterThan(Number(before));
    const chartAfter = await page.locator("svg.chart .current").getAttribute("data-state");
    expect(chartAfter).toBe(await page.locator("#chart-state").textContent());
    expect(await page.locator("#at-label").textContent()).toBe("30 / 43");
    expect(chartBefore).toBeTruthy();
    await page.locator("input#at").fill("22");
    await expect.poll(() => page.locator("#at-part .at").getAttribute("data-index"), { timeout: WAIT }).toBe("22");
    await shot("travel");
  });

  it("time travel: an earlier call's output is text the page's find reaches, from the point it completed (issue 30)", async () => {
    const entries = await readJournal(journal, "sink-1");
    const done = (stepId: string) =>
      entries.findIndex((e) => e.type === "frame.completed" && e.data.frameId === stepId) + 1;
    // Turn 1's fetch (plain) and turn 0's (claim-checked: read back from the blob store), each at its own point.
    for (const [stepId, value] of [
      ["sink#turn:1:tool:0", "short page 1"],
      ["sink#turn:0:tool:0", "2026-01-01T00:00:00.000Z"],
    ] as const) {
      const at = done(stepId);
      await page.goto(`${viewer.url}/runs/sink-1/travel?at=${at - 1}`);
      expect(await page.locator("#at-part").textContent()).not.toContain(value);
      await page.locator("input#at").fill(String(at));
      await expect
        .poll(() => page.locator("#at-part .at").getAttribute("data-index"), { timeout: WAIT })
        .toBe(String(at));
      expect(await page.locator("section.log.full").textContent()).toContain(value);
      expect(await page.evaluate((v) => (globalThis as unknown as { find(s: string): boolean }).find(v), value)).toBe(
        true,
      );
    }
    // The lean log shows each call's digest at the last point.
    await page.goto(`${viewer.url}/runs/sink-1/travel`);
    const lean = await page.locator("section.log.lean").textContent();
    for (const step of await rebuildToolCallLog(journal, "sink-1", "lean"))
      if (step.digest !== null) expect(lean ?? "").toContain(step.digest);
  });

  it("opens a step: its output resolved and verified", async () => {
    await page.goto(`${viewer.url}/runs/sink-1`);
    await page.click('tr[data-step="sink#turn:2:tool:0"] a');
    await page.waitForSelector("pre.output");
    expect(await page.locator("h1").textContent()).toContain("sink#turn:2:tool:0");
    expect(await page.locator(".verified").textContent()).toContain("claim-check envelope");
    await shot("step");
  });

  it("approves a pending call, after a confirmation, and sees the run go on", async () => {
    await page.goto(`${viewer.url}/runs/wait-1`);
    await shot("approval");
    await page.click("button.approve");
    expect(await page.locator("p.confirm").textContent()).toContain(
      "Approve call support#turn:1:tool:0 of run wait-1?",
    );
    await page.click("button.confirm");
    await page.waitForURL(`${viewer.url}/runs/wait-1`);
    expect(await page.locator("h1 .status").textContent()).toBe("completed");
    expect(await page.locator('tr[data-step="support#turn:1:tool:0"] .status').textContent()).toBe("ok");
  });

  it("updates a run's page while the run goes on", async () => {
    const other = journal; // the same file: the run is resumed beside the open page
    try {
      await supportLoop(() => "pending").run({ runId: "live-1", journal: other, input: "refund A-17" });
    } catch (e) {
      if (!isAgentInterruptedError(e)) throw e;
    }
    await page.goto(`${viewer.url}/runs/live-1`);
    expect(await page.locator("h1 .status").textContent()).toBe("waiting for approval"); // interrupted, for an approval no one gave yet
    await supportLoop().run({ runId: "live-1", journal: other, approvals: { "support#turn:1:tool:0": true } });
    await expect.poll(() => page.locator("h1 .status").textContent(), { timeout: WAIT }).toBe("completed");
  });
});

/**
 * The run-control API, with what a runtime does after an approval: the approval is journaled by
 * `recordApproval` (the viewer's button), then the run is resumed (a worker would pick it up).
 */
function approvingActions(): ViewerActions {
  return {
    async recordApproval(journal, runId, stepId, answer) {
      await recordApproval(journal, runId, stepId, answer);
      await supportLoop().run({ runId, journal });
    },
    cancelRun,
    forkRun,
  };
}

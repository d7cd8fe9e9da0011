import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJournal, memoryStore, type OpenJournal } from "../../src/index.ts";
import type { ViewerActions } from "../../src/viewer/actions.ts";
import { startViewer, type Viewer } from "../../src/viewer/server.ts";
import { waitingRun } from "./support.ts";

/**
 * The viewer takes a form from its own pages only (issue 30): a POST from another origin is
 * refused, and so is one with no `Origin` header at all (a client that sends none is not a page
 * of this viewer) unless it carries the token this server's pages embed, random per start.
 */

const STEP = "support#turn:1:tool:0";
let journal: OpenJournal;
let viewer: Viewer;
const calls: unknown[][] = [];

beforeAll(async () => {
  journal = createJournal({ store: memoryStore({ json: true }) });
  await waitingRun(journal, "wait-1");
  const actions: ViewerActions = {
    recordApproval: async (...args) => calls.push(["recordApproval", ...args.slice(1)]),
    cancelRun: async (...args) => calls.push(["cancelRun", ...args.slice(1)]),
    forkRun: async (...args) => calls.push(["forkRun", ...args.slice(1)]),
  };
  viewer = await startViewer({ journal, actions });
});
afterAll(async () => {
  await viewer?.stop();
  await journal?.close();
});

/** A raw POST (fetch always sends an Origin of its own choosing, or none we control). */
const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(
      viewer.url + path,
      { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers } },
      (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });

/** The token the run page's forms carry. */
async function pageToken(): Promise<string> {
  const page = await (await fetch(`${viewer.url}/runs/wait-1`)).text();
  const tokens = [...page.matchAll(/<input type="hidden" name="token" value="([^"]+)">/g)].map((m) => m[1]);
  expect(tokens.length).toBeGreaterThanOrEqual(3); // approve/deny, cancel, fork
  expect(new Set(tokens).size).toBe(1);
  return tokens[0] as string;
}

const FORMS = [
  ["approve", `action=approve&stepId=${encodeURIComponent(STEP)}&confirmed=yes`],
  ["deny", `action=deny&stepId=${encodeURIComponent(STEP)}&confirmed=yes`],
  ["cancel", "action=cancel&confirmed=yes"],
  ["fork", `action=fork&at=${encodeURIComponent("support#turn:0:model")}&newRunId=wait-2&confirmed=yes`],
] as const;

describe("the viewer's forms", () => {
  it.each(FORMS)(
    "%s: refused without an Origin header and without the token, as from another origin",
    async (_, form) => {
      const none = await post("/runs/wait-1/actions", form);
      expect(none.status).toBe(403);
      expect(none.text).toContain("token");
      const foreign = await post("/runs/wait-1/actions", form, { origin: "http://evil.example" });
      expect(foreign.status).toBe(403);
      const wrong = await post("/runs/wait-1/actions", `${form}&token=guessed`);
      expect(wrong.status).toBe(403);
      // A foreign origin is refused even with the right token.
      const foreignWithToken = await post("/runs/wait-1/actions", `${form}&token=${await pageToken()}`, {
        origin: "http://evil.example",
      });
      expect(foreignWithToken.status).toBe(403);
      expect(calls).toEqual([]);
    },
  );

  it("the page's own form works: with its token and no Origin, or from the viewer's origin, via the confirmation page", async () => {
    const token = await pageToken();
    const ask = await post("/runs/wait-1/actions", `action=deny&stepId=${encodeURIComponent(STEP)}&token=${token}`);
    expect(ask.status).toBe(200);
    // The confirmation page posts the same form again, with the token.
    expect(ask.text).toContain(`<input type="hidden" name="token" value="${token}">`);
    expect((ask.text.match(/name="token"/g) ?? []).length).toBe(1);
    const denied = await post(
      "/runs/wait-1/actions",
      `action=deny&stepId=${encodeURIComponent(STEP)}&token=${token}&confirmed=yes`,
    );
    expect(denied.status).toBe(303);
    const cancelled = await post("/runs/wait-1/actions", "action=cancel&confirmed=yes", { origin: viewer.url });
    expect(cancelled.status).toBe(303);
    expect(calls).toEqual([
      ["recordApproval", "wait-1", STEP, { approved: false, by: "loom view" }],
      ["cancelRun", "wait-1", { reason: "cancelled from loom view" }],
    ]);
  });

  it("another start of the viewer has another token: an old page's token is refused", async () => {
    const token = await pageToken();
    const other = await startViewer({
      journal,
      actions: { recordApproval: async () => {}, cancelRun: async () => {}, forkRun: async () => {} },
    });
    try {
      const page = await (await fetch(`${other.url}/runs/wait-1`)).text();
      expect(page).toContain('name="token"');
      expect(page).not.toContain(token);
      const res = await new Promise<number>((resolve, reject) => {
        const req = request(
          `${other.url}/runs/wait-1/actions`,
          { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" } },
          (r) => resolve(r.statusCode ?? 0),
        );
        req.on("error", reject);
        req.end(`action=cancel&token=${token}&confirmed=yes`);
      });
      expect(res).toBe(403);
    } finally {
      await other.stop();
    }
  });
});

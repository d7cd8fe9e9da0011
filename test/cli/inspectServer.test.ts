import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type InspectorServer, startInspectorServer } from "../../src/cli/inspectServer.ts";
import { freePort } from "./support.ts";

/**
 * `loom inspect`'s server is fenced like the viewer: its page and websocket answer only a client
 * that presents the token of the address it prints, addressed to it by a loopback name (not a
 * DNS-rebinding name), and from its own page's origin or from no browser at all. What it keeps
 * (a run's tool calls, the model's text) never reaches another page.
 */

const KEPT = 37;
const SECRET = "sk-the-model-said-this";
let server: InspectorServer;
let feeder: WebSocket;
let port = 0;
let token = "";

/** Opens a websocket; resolves with its status (101 when open, else the refusal's) and what it was sent. */
function connect(url: string, options: { origin?: string; host?: string } = {}) {
  return new Promise<{ status: number; received: string[]; socket: WebSocket }>((resolve) => {
    const socket = new WebSocket(url, {
      ...(options.origin === undefined ? {} : { origin: options.origin }),
      ...(options.host === undefined ? {} : { headers: { host: options.host } }),
    });
    const received: string[] = [];
    socket.on("message", (data) => {
      received.push(String(data));
      if (received.length === KEPT) resolve({ status: 101, received, socket });
    });
    socket.on("unexpected-response", (_req, res) => {
      resolve({ status: res.statusCode ?? 0, received, socket });
      res.resume();
      socket.terminate();
    });
    socket.on("error", () => resolve({ status: 0, received, socket }));
  });
}

/** A raw HTTP request (fetch sends neither another Host nor an Origin of our choosing). */
function get(path: string, headers: Record<string, string> = {}, method = "GET") {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method, headers }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

beforeAll(async () => {
  port = await freePort();
  server = await startInspectorServer({ host: "127.0.0.1", port });
  token = new URL(server.url.http).searchParams.get("token") ?? "";
  // The replay's side: it sends the run's events, which the server keeps for pages that come later.
  feeder = new WebSocket(server.url.ws);
  await new Promise((resolve, reject) => feeder.once("open", resolve).once("error", reject));
  for (let i = 0; i < KEPT; i++) feeder.send(JSON.stringify({ type: "@xstate.event", i, text: SECRET }));
  await new Promise<void>((resolve) => feeder.ping(undefined, undefined, () => feeder.once("pong", () => resolve())));
});

afterAll(async () => {
  feeder.close();
  await server.stop();
});

describe("loom inspect's server", () => {
  it("puts a random token in both addresses; port 0 is a free port, named in them", async () => {
    expect(token).toMatch(/^[\w-]{32}$/);
    expect(server.url).toEqual({
      http: `http://127.0.0.1:${port}/?token=${token}`,
      ws: `ws://127.0.0.1:${port}/?token=${token}`,
    });
    const other = await startInspectorServer({ host: "127.0.0.1", port: 0 });
    try {
      expect(other.port).toBeGreaterThan(0);
      expect(other.url.http).toBe(
        `http://127.0.0.1:${other.port}/?token=${new URL(other.url.http).searchParams.get("token")}`,
      );
      expect(new URL(other.url.http).searchParams.get("token")).not.toBe(token);
    } finally {
      await other.stop();
    }
  });

  const ws = (query: string) => `ws://127.0.0.1:${port}/${query}`;
  const rebound = () => `evil.rebind.example:${port}`;
  const refusedSockets: [string, () => string, { origin?: string; host?: () => string }, number][] = [
    ["another site's page, with the token", () => ws(`?token=${token}`), { origin: "http://evil.example" }, 403],
    ["another site's page, without the token", () => ws(""), { origin: "http://evil.example" }, 403],
    ["another local server's page", () => ws(`?token=${token}`), { origin: "http://127.0.0.1:1" }, 403],
    ["a sandboxed page (Origin: null)", () => ws(`?token=${token}`), { origin: "null" }, 403],
    [
      "a DNS-rebinding page, with the token",
      () => ws(`?token=${token}`),
      { origin: `http://${rebound()}`, host: rebound },
      421,
    ],
    ["a request for another host name", () => ws(`?token=${token}`), { host: () => "evil.example" }, 421],
    ["no token", () => ws(""), {}, 403],
    ["an empty token", () => ws("?token="), {}, 403],
    ["a wrong token of the same length", () => ws(`?token=${"A".repeat(32)}`), {}, 403],
    ["a wrong token of another length", () => ws("?token=guess"), {}, 403],
    ["the token in another parameter", () => ws(`?t=${token}`), {}, 403],
  ];

  it.each(refusedSockets)("refuses a websocket from %s, and sends it nothing", async (_what, url, options, status) => {
    const r = await connect(url(), {
      ...(options.origin === undefined ? {} : { origin: options.origin }),
      ...(options.host === undefined ? {} : { host: options.host() }),
    });
    expect(r.status).toBe(status);
    expect(r.received).toEqual([]);
  });

  it("serves the kept messages to its own page (its origin and token) and to a client without a browser", async () => {
    const page = await connect(server.url.ws, { origin: `http://127.0.0.1:${port}` });
    const tool = await connect(server.url.ws);
    try {
      expect([page.status, page.received.length]).toEqual([101, KEPT]);
      expect([tool.status, tool.received.length]).toEqual([101, KEPT]);
      expect(page.received[0]).toContain(SECRET);
    } finally {
      page.socket.close();
      tool.socket.close();
    }
  });

  it("drops what a browser's websocket sends: a page only listens", async () => {
    const page = await connect(server.url.ws, { origin: `http://127.0.0.1:${port}` });
    expect(page.status).toBe(101);
    page.socket.send(JSON.stringify({ type: "@xstate.event", forged: true }));
    // The pong comes after the server handled the message sent before the ping.
    await new Promise<void>((resolve) =>
      page.socket.ping(undefined, undefined, () => page.socket.once("pong", () => resolve())),
    );
    page.socket.close();
    const later = await connect(server.url.ws);
    try {
      expect(later.received).toHaveLength(KEPT);
      expect(later.received.some((m) => m.includes("forged"))).toBe(false);
    } finally {
      later.socket.close();
    }
  });

  const refusedPages: [string, string, Record<string, string>, string, number][] = [
    ["a DNS-rebinding Host", "?token=", { host: "evil.rebind.example" }, "GET", 421],
    ["a DNS-rebinding Host with its port", "?token=", { host: "evil.rebind.example:8080" }, "GET", 421],
    ["a Host naming a LAN address", "?token=", { host: "192.168.1.20" }, "GET", 421],
    ["no token", "", {}, "GET", 403],
    ["a wrong token", "?token=guess", {}, "GET", 403],
    ["another site's Origin", "?token=", { origin: "http://evil.example" }, "GET", 403],
    ["a POST", "?token=", {}, "POST", 405],
  ];

  it.each(refusedPages)("refuses the page for %s", async (_what, query, headers, method, status) => {
    const path = `/${query === "?token=" ? `?token=${token}` : query}`;
    const r = await get(path, headers, method);
    expect(r.status).toBe(status);
    expect(r.body).not.toContain(token);
    expect(r.body).not.toContain("<iframe");
  });

  it("serves the page at the printed address, its websocket carrying the token and no referrer leaving it", async () => {
    const r = await get(`/?token=${token}`);
    expect(r.status).toBe(200);
    expect(r.body).toContain(`"/?token=${token}"`);
    expect(r.body).toContain('<meta name="referrer" content="no-referrer">');
    expect(r.headers["referrer-policy"]).toBe("no-referrer");
    expect((await get(`/?token=${token}`, { host: `localhost:${port}` })).status).toBe(200);
  });
});
